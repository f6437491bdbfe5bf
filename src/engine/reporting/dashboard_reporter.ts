/**
 * One rank's reports to `ringrun --dashboard`, sent from the engine thread (which the training
 * loop never blocks) about once a second: its counters (stats.ts), its state, the calls still
 * pending with how long each has waited, the last warning and error it logged, and the latest
 * training metrics the TF.js callback published (training_metrics.ts).
 *
 * Watching must never slow or stop the job, so a report is sent only when the previous one has
 * finished (a slow dashboard gets fewer reports, never a queue of them); after a failure the
 * reporter waits longer each time (up to kMaxBackoffMs), and a dashboard that is gone costs one
 * refused connection now and then. Nothing here is awaited by the engine; its timers do not
 * hold a process open. How a report travels is the entry's (ReportSender): a small HTTP POST
 * from a Node rank (dashboard_http.ts), through its page and ringrun from a browser rank.
 */
import { unrefTimer } from '../../core/soon.js';
import { kTrainingChannel, type TrainingMetrics } from '../../observability/training_metrics.js';
import type { RankStats } from './stats.js';

export const kReportIntervalMs = 1000;
const kMaxBackoffMs = 30_000;
/** Pending calls listed in a report, oldest first. */
const kPendingListed = 20;
const kMaxText = 2000;
const kWarningsKept = 5;

/** A rank's own view of itself; the launcher adds 'starting' (no report yet) and 'stalled'. */
export type ReportedState = 'starting' | 'running' | 'idle' | 'failed' | 'finished';

export interface LogNote {
  /** Date.now() */
  t: number;
  text: string;
}

/** What a rank sends. */
export interface RankReport {
  rank: number;
  size: number;
  host: string;
  /** null: a browser rank (no process of its own). */
  pid: number | null;
  /** Date.now() at the rank. */
  t: number;
  state: ReportedState;
  stats: RankStats | undefined;
  pending: { name: string; op: string; waitedMs: number }[];
  lastError: LogNote | undefined;
  warnings: LogNote[];
  training: TrainingMetrics | undefined;
  /** The file this rank's timeline goes to (absolute), if it writes one: the page offers the last minutes. */
  timelineFile: string | undefined;
}

/** What the reporter reads of its engine. */
export interface ReportSource {
  rank: number;
  size: number;
  /** The rank's timeline file, if it writes one. */
  timelineFile: string | undefined;
  /** Undefined until the engine is connected. */
  stats(): RankStats | undefined;
  pending(limit: number): RankReport['pending'];
  condition(): { failure: string | undefined; closing: boolean };
}

/** How reports leave the rank. */
export interface ReportSender {
  /** Sends one report (JSON); resolves to whether the dashboard took it. Never rejects. */
  send(body: string): Promise<boolean>;
  close(): void;
}

/** Who the reports say is reporting: this machine's name and process, or the browser's. */
export interface ReporterIdentity {
  host: string;
  pid: number | null;
}

export class DashboardReporter {
  private readonly channel: BroadcastChannel;
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = false;
  private failures = 0;
  private nextTryAt = 0;
  private closed = false;
  private lastCompleted = -1;
  private lastError: LogNote | undefined;
  private readonly warnings: LogNote[] = [];
  private training: TrainingMetrics | undefined;
  private urgent: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly sender: ReportSender,
    private readonly identity: ReporterIdentity,
    private readonly source: ReportSource,
    private readonly intervalMs = kReportIntervalMs,
  ) {
    // The global BroadcastChannel: Node's (node:worker_threads') or a browser's.
    this.channel = new BroadcastChannel(kTrainingChannel);
    unrefTimer(this.channel);
    this.channel.onmessage = (event) => {
      const metrics = (event as { data?: TrainingMetrics }).data;
      if (metrics && metrics.rank === source.rank) this.training = metrics;
    };
    this.timer = unrefTimer(setInterval(() => this.tick(), intervalMs));
    this.tick();
  }

  /** A line the rank's logger wrote: its warnings and errors go to the page. */
  noteLogLine(line: string): void {
    const match = / (ERROR|WARN): (.*)$/s.exec(line.trimEnd());
    if (!match) return;
    const note = { t: Date.now(), text: (match[2] as string).slice(0, kMaxText) };
    if (match[1] === 'ERROR') {
      this.lastError = note;
      this.soon();
    } else {
      this.warnings.push(note);
      if (this.warnings.length > kWarningsKept) this.warnings.shift();
      this.soon();
    }
  }

  /** Sends the last report (state finished or failed), waiting for it at most `waitMs`; then stops. */
  async close(waitMs = 300): Promise<void> {
    if (this.closed) return;
    clearInterval(this.timer);
    clearTimeout(this.urgent);
    const sent = this.inFlight ? Promise.resolve() : this.send(this.report());
    this.closed = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([sent, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    this.channel.close();
    this.sender.close();
  }

  /** A warning or an error: report it within 50 ms rather than at the next tick. */
  private soon(): void {
    if (this.closed || this.urgent) return;
    this.urgent = unrefTimer(
      setTimeout(() => {
        this.urgent = undefined;
        this.tick();
      }, 50),
    );
  }

  private tick(): void {
    if (this.closed || this.inFlight || Date.now() < this.nextTryAt) return;
    void this.send(this.report());
  }

  private report(): RankReport {
    const { failure, closing } = this.source.condition();
    const stats = this.source.stats();
    let state: ReportedState;
    if (failure !== undefined) state = 'failed';
    else if (closing || this.closed) state = 'finished';
    else if (stats === undefined) state = 'starting';
    else state = stats.pending > 0 || stats.completed !== this.lastCompleted ? 'running' : 'idle';
    if (stats) this.lastCompleted = stats.completed;
    const lastError = failure !== undefined && this.lastError === undefined ? { t: Date.now(), text: failure } : this.lastError;
    return {
      rank: this.source.rank,
      size: this.source.size,
      host: this.identity.host,
      pid: this.identity.pid,
      t: Date.now(),
      state,
      stats,
      pending: stats && stats.pending > 0 ? this.source.pending(kPendingListed) : [],
      lastError,
      warnings: [...this.warnings],
      training: this.training,
      timelineFile: this.source.timelineFile,
    };
  }

  private async send(report: RankReport): Promise<void> {
    this.inFlight = true;
    const ok = await this.sender.send(JSON.stringify(report));
    this.inFlight = false;
    if (ok) this.failures = 0;
    else {
      this.failures++;
      this.nextTryAt = Date.now() + Math.min(kMaxBackoffMs, this.intervalMs * 2 ** this.failures);
    }
  }
}
