/**
 * One browser rank as ringrun's Job sees it (the RankRunner of a tab): it starts when a page
 * takes its place in the job, prints what its program prints, and ends when the page says
 * how its program ended, or fails when the page's control socket closes first (the tab was
 * closed, navigated away or crashed). Stopping asks the page to stop its workers; a SIGKILL
 * cuts the socket.
 */
import type { WebSocket } from 'ws';
import { OutputPrefixer, rankPrefix } from '../output_prefixer.js';
import { findRankError, linesToShow, type RankError } from '../rank_error.js';
import type { RankExit, RankRunner, RankSinks } from '../rank_runner.js';
import { TailBuffer } from '../tail_buffer.js';
import type { LauncherToPage, PageToLauncher } from './page_protocol.js';
import { describeBrowser } from './user_agent.js';

const kKeptLines = 60;

/** What a page is told when it takes this rank. */
export interface Assignment {
  env: Record<string, string>;
  args: string[];
  programUrl: string;
  engineUrl: string;
}

export class BrowserRank implements RankRunner {
  readonly pid = undefined;
  readonly started: Promise<void>;
  readonly exited: Promise<RankExit>;
  private socket: WebSocket | undefined;
  private browser: string | undefined;
  private exit: RankExit | undefined;
  private markStarted: () => void = () => {};
  private resolveExit: (exit: RankExit) => void = () => {};
  private readonly tail: TailBuffer;
  private readonly stdout: OutputPrefixer;
  private readonly stderr: OutputPrefixer;

  constructor(
    readonly rank: number,
    private readonly assignment: Assignment,
    sinks: RankSinks,
    private readonly tailLines: number,
    /** With --dashboard: the page's reports, passed on (report_forwarder.ts). */
    private readonly onReport?: (rank: BrowserRank, body: string) => void,
  ) {
    // More lines than shown: enough to find the error the program died of (rank_error.ts).
    this.tail = new TailBuffer(Math.max(tailLines, kKeptLines));
    const onLine = (line: string) => {
      this.tail.push(line);
      sinks.line?.(line);
    };
    this.stdout = new OutputPrefixer(rankPrefix(rank), sinks.stdout, onLine);
    this.stderr = new OutputPrefixer(rankPrefix(rank), sinks.stderr, onLine);
    this.started = new Promise((resolve) => {
      this.markStarted = resolve;
    });
    this.exited = new Promise((resolve) => {
      this.resolveExit = resolve;
    });
  }

  /** "browser" until a page takes the rank, then its browser and OS ("Chrome 156 on Linux"). */
  get host(): string {
    return this.browser ?? 'browser';
  }

  /** Whether a page may still take this rank. */
  get free(): boolean {
    return this.socket === undefined && this.exit === undefined;
  }

  get hasStarted(): boolean {
    return this.socket !== undefined;
  }

  get hasExited(): boolean {
    return this.exit !== undefined;
  }

  get exitStatus(): RankExit | undefined {
    return this.exit;
  }

  /** A page takes the rank: it gets its assignment, and the rank runs from now on. */
  attach(socket: WebSocket, userAgent: string): void {
    this.socket = socket;
    this.browser = describeBrowser(userAgent);
    socket.on('message', (data) => this.onMessage(String(data)));
    socket.on('close', () =>
      this.end({ code: null, reason: `(${this.host}) closed its tab, or the browser crashed, before its program finished` }),
    );
    this.send({ type: 'assigned', rank: this.rank, ...this.assignment });
    this.markStarted();
  }

  alive(): boolean {
    return this.exit === undefined;
  }

  stop(signal: 'SIGTERM' | 'SIGKILL'): void {
    if (this.socket === undefined) {
      this.end({ code: null, reason: 'was stopped before a tab took it' });
      return;
    }
    if (signal === 'SIGKILL') {
      this.socket.terminate();
      this.end({ code: null, reason: `(${this.host}) did not stop in time; its control socket was cut` });
    } else this.send({ type: 'stop' });
  }

  isStopped(): boolean {
    return false;
  }

  lastLines(): string[] {
    const lines = this.tail.toArray();
    return lines.slice(Math.max(0, lines.length - this.tailLines));
  }

  failureLines(): { error: RankError | undefined; lastLines: string[] } {
    const lines = this.tail.toArray();
    const error = findRankError(lines);
    return { error, lastLines: linesToShow(lines, error, this.tailLines) };
  }

  /** A page's output arrives before its exit message, on the same socket: nothing is left to wait for. */
  async outputEnded(): Promise<void> {}

  async drain(): Promise<void> {
    this.stdout.end();
    this.stderr.end();
  }

  private onMessage(text: string): void {
    let message: PageToLauncher;
    try {
      message = JSON.parse(text) as PageToLauncher;
    } catch {
      return;
    }
    if (message.type === 'output') (message.stream === 'stderr' ? this.stderr : this.stdout).push(message.text);
    else if (message.type === 'report') this.onReport?.(this, String(message.body));
    else if (message.type === 'exit') {
      const code = Number.isSafeInteger(message.code) ? message.code : 1;
      this.end({ code, ...(message.reason !== undefined && { reason: `(${this.host}) ${message.reason}` }) });
      this.socket?.close(1000);
    }
  }

  private end(how: { code: number | null; reason?: string }): void {
    if (this.exit !== undefined) return;
    this.exit = { rank: this.rank, pid: undefined, signal: null, host: this.host, ...how };
    this.resolveExit(this.exit);
  }

  private send(message: LauncherToPage): void {
    if (this.socket?.readyState === 1) this.socket.send(JSON.stringify(message));
  }
}
