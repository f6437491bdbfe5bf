/**
 * The start-up progress line: how many ranks run, how many published their address in the
 * store (they are in init()), and when every mesh is complete.
 *
 * On a terminal it is one line on stderr, redrawn in place (at most every kRedrawMs), taken
 * away before any rank output is printed and for good once the job is connected or the
 * start-up timeout has passed. Elsewhere (CI logs) nothing is printed while start-up is quick:
 * a line every kQuietLineMs while it is not, and with --verbose one line per change.
 */

const kRedrawMs = 200;
const kQuietLineMs = 5000;
const kClear = '\r\x1b[K';

export interface ProgressOptions {
  size: number;
  /** stderr is a terminal. */
  tty: boolean;
  verbose: boolean;
  write(text: string): void;
  /** Stop reporting after this long (the start-up deadline). */
  limitMs: number;
}

export class Progress {
  private started = 0;
  private published = 0;
  private connected = false;
  /** The launcher reached rank 0's store, so the in-init() count means something. */
  private storeSeen = false;
  private shown = false;
  private done = false;
  private readonly begin = Date.now();
  private redraw: NodeJS.Timeout | undefined;
  private readonly quiet: NodeJS.Timeout | undefined;
  private readonly limit: NodeJS.Timeout;

  constructor(private readonly options: ProgressOptions) {
    if (!options.tty && !options.verbose) {
      // Only while something is known to be missing: ranks not running, or (once the store
      // is reachable from here) ranks not connected.
      this.quiet = setInterval(() => {
        if (this.started < options.size || (this.storeSeen && !this.connected)) this.options.write(`ringrun: ${this.text()}\n`);
      }, kQuietLineMs);
      this.quiet.unref();
    }
    this.limit = setTimeout(() => this.stop(), options.limitMs);
    this.limit.unref();
  }

  onStarted(count: number): void {
    this.started = count;
    this.changed();
  }

  /** The launcher is connected to the store (store_watch.ts). */
  onStore(): void {
    this.storeSeen = true;
    this.changed();
  }

  onPublished(count: number): void {
    this.published = count;
    this.changed();
  }

  onConnected(): void {
    if (this.done) return;
    this.connected = true;
    this.changed();
    this.stop();
  }

  /** Call before printing rank output: a live line must not mix with it. */
  hide(): void {
    if (!this.shown) return;
    this.options.write(kClear);
    this.shown = false;
    this.schedule();
  }

  stop(): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.quiet);
    clearTimeout(this.redraw);
    clearTimeout(this.limit);
    if (this.shown) this.options.write(kClear);
    this.shown = false;
  }

  private text(): string {
    const seconds = ((Date.now() - this.begin) / 1000).toFixed(1);
    const { size } = this.options;
    if (this.connected) return `all ${size} ranks connected (${seconds} s)`;
    const init = this.storeSeen ? `, ${this.published}/${size} in init()` : '';
    return `starting: ${this.started}/${size} ranks running${init} (${seconds} s)`;
  }

  private changed(): void {
    if (this.connected && this.options.verbose && !this.options.tty) this.options.write(`ringrun: ${this.text()}\n`);
    else this.schedule();
  }

  /** Draws the latest state soon: several changes in a burst make one line. */
  private schedule(): void {
    const { tty, verbose } = this.options;
    if (!(tty || verbose) || this.done || this.redraw !== undefined) return;
    this.redraw = setTimeout(() => {
      this.redraw = undefined;
      if (this.done) return;
      if (!tty) {
        this.options.write(`ringrun: ${this.text()}\n`);
        return;
      }
      this.options.write(`${kClear}ringrun: ${this.text()}`);
      this.shown = true;
    }, kRedrawMs);
    this.redraw.unref();
  }
}
