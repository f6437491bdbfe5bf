/**
 * The start-up progress line: how many ranks run, how many called init() (their address is in
 * rank 0's store), which ranks it waits for, and when every rank is connected to every other:
 * `starting: 3/3 ranks running, 2/3 in init(), waiting for rank 2 to call init() (5.0 s)`.
 *
 * On a terminal it is one line on stderr, redrawn in place (at most every kRedrawMs), taken
 * away before any rank output is printed and for good once the job is connected or the
 * start-up timeout has passed. Elsewhere (CI logs) nothing is printed while start-up is quick:
 * a line every kQuietLineMs while it is not, and with --verbose one line per change.
 */

const kRedrawMs = 200;
const kQuietLineMs = 5000;
const kClear = '\r\x1b[K';
/** Ranks named in the line, at most: a job of hundreds says how many more. */
const kNamedRanks = 8;

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
  private readonly exited = new Set<number>();
  private readonly published = new Set<number>();
  private readonly finished = new Set<number>();
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

  /** A rank's process ended. */
  onExited(rank: number): void {
    this.exited.add(rank);
    this.changed();
  }

  /** `rank` called init(). */
  onPublished(rank: number): void {
    this.published.add(rank);
    this.changed();
  }

  /** `rank` connected to every other rank. */
  onFinished(rank: number): void {
    this.finished.add(rank);
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
    const running = this.started - this.exited.size;
    const parts = [`${running}/${size} ranks running`];
    if (this.exited.size > 0) parts[0] += ` (${rankList([...this.exited])} exited)`;
    const ranks = [...Array(size).keys()];
    const toStart = size - this.started;
    if (toStart > 0) parts.push(`waiting for ${toStart} ${toStart === 1 ? 'rank' : 'ranks'} to start`);
    else if (this.storeSeen) {
      parts.push(`${this.published.size}/${size} in init()`);
      const notInit = ranks.filter((rank) => !this.published.has(rank));
      const notFinished = ranks.filter((rank) => !this.finished.has(rank));
      if (notInit.length > 0) parts.push(`waiting for ${rankList(notInit)} to call init()`);
      else if (notFinished.length > 0) parts.push(`waiting for ${rankList(notFinished)} to connect`);
    }
    return `starting: ${parts.join(', ')} (${seconds} s)`;
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

/** "rank 2", "ranks 0, 3", "ranks 0, 1, 2, 3, 4, 5, 6, 7 and 92 more". */
function rankList(ranks: readonly number[]): string {
  const named = ranks.slice(0, kNamedRanks).join(', ');
  const more = ranks.length > kNamedRanks ? ` and ${ranks.length - kNamedRanks} more` : '';
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${named}${more}`;
}
