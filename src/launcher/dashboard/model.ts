/**
 * What the dashboard knows of a job, and what the page reads: one row per rank, built from the
 * rank's own reports (engine/reporting/dashboard_reporter.ts) and from what the launcher itself
 * says (a rank's pid when spawned, its exit, the failure report); a series sampled once a second
 * for the charts; and the job's events (stall warnings, errors, the launcher's messages).
 *
 * A rank's state: 'starting' until its first report; then what it reports (running, idle,
 * failed, finished), made 'stalled' when its oldest pending call has waited kStalledAfterMs or
 * its reports stopped for as long (a stopped or hung process); and 'failed' or 'finished' from
 * its exit, which the launcher sees even when the rank could not say it (SIGKILL).
 *
 * Bus bandwidth is the mean over ranks of the data-plane bytes each sends per second: for ring
 * allreduce, allgather and reducescatter that is nccl-tests' busbw (the bytes the busiest link
 * carries), so it reads the same as the bench's column.
 */
import type { RankReport, ReportedState } from '../../engine/reporting/dashboard_reporter.js';

export type RankState = ReportedState | 'stalled';

export const kStalledAfterMs = 5000;
/** Points kept for the charts: ten minutes at one a second. */
const kMaxPoints = 600;
const kMaxEvents = 200;
const kMaxReportLines = 60;
/** A report is fresh (its rates count in the job's) for this long. */
const kFreshMs = 3000;

export interface PendingCall {
  name: string;
  op: string;
  waitedMs: number;
}

export interface RankRow {
  rank: number;
  host: string | null;
  pid: number | null;
  state: RankState;
  completed: number;
  failed: number;
  collectivesPerSec: number;
  sentPerSec: number;
  receivedPerSec: number;
  pendingCount: number;
  /** The oldest pending calls, with their waits as of now. */
  pending: PendingCall[];
  lastError: string | null;
  /** How the rank's process ended, as the launcher says it ("exited with code 0", "was killed by SIGKILL"). */
  exit: string | null;
  /** Milliseconds since its last report (null: none yet). */
  silentMs: number | null;
}

export interface SeriesPoint {
  /** Seconds since the epoch. */
  t: number;
  collectivesPerSec: number;
  busBytesPerSec: number;
  /** Per rank, by rank. */
  sentPerSec: number[];
  receivedPerSec: number[];
  loss: number | null;
  accuracy: number | null;
  samplesPerSec: number | null;
}

export interface JobEvent {
  t: number;
  level: 'info' | 'warning' | 'error';
  rank: number | null;
  text: string;
}

export interface TrainingView {
  epoch: number;
  batch: number;
  epochs: number | null;
  batches: number | null;
  logs: Record<string, number>;
}

export interface DashboardState {
  job: {
    command: string;
    size: number;
    startedAt: number;
    now: number;
    /** The launcher's exit code once the job is over. */
    exitCode: number | null;
    /** Whether the merged timeline can be downloaded (/api/timeline): some rank on this host writes one. */
    timeline: boolean;
  };
  ranks: RankRow[];
  events: JobEvent[];
  failureReport: string[] | null;
  training: TrainingView | null;
}

interface RankRecord {
  report: RankReport | undefined;
  /** When the launcher received it (Date.now()). */
  receivedAt: number;
  pid: number | null;
  exit: { text: string; failed: boolean } | null;
  /** The error the launcher read in the rank's output after it failed (launcher/rank_error.ts). */
  error: string | null;
  rates: { collectives: number; sent: number; received: number };
  seen: Set<string>;
}

export class DashboardModel {
  private readonly ranks: RankRecord[];
  private readonly points: SeriesPoint[] = [];
  private readonly events: JobEvent[] = [];
  private failureReport: string[] | null = null;
  private exitCode: number | null = null;
  private readonly startedAt = Date.now();
  /** Bumped on every change of what the page reads. */
  version = 0;

  constructor(
    private readonly size: number,
    private readonly command: string,
    /** This host's name: timeline files of ranks elsewhere cannot be read. */
    private readonly host: string,
    private readonly now: () => number = Date.now,
  ) {
    this.ranks = Array.from({ length: size }, () => ({
      report: undefined,
      receivedAt: 0,
      pid: null,
      exit: null,
      error: null,
      rates: { collectives: 0, sent: 0, received: 0 },
      seen: new Set<string>(),
    }));
  }

  /** A rank's report; false when it is not one of this job's ranks. */
  ingest(report: RankReport): boolean {
    const record = this.ranks[report.rank];
    // An elastic job's size changes with its generations: any rank below the largest counts.
    if (record === undefined) return false;
    const previous = record.report;
    const now = this.now();
    if (previous !== undefined && previous.pid === report.pid && previous.stats && report.stats && report.t > previous.t) {
      const seconds = (report.t - previous.t) / 1000;
      // Counters start again when an elastic job re-forms: a rate is never negative.
      const rate = (now: number, before: number) => Math.max(0, now - before) / seconds;
      record.rates = {
        collectives: rate(report.stats.completed, previous.stats.completed),
        sent: rate(report.stats.sentBytes, previous.stats.sentBytes),
        received: rate(report.stats.receivedBytes, previous.stats.receivedBytes),
      };
    } else if (previous !== undefined && previous.pid !== report.pid) {
      // A new process for this rank (ringrun --max-restarts): its old exit is history.
      record.exit = null;
      record.error = null;
      record.rates = { collectives: 0, sent: 0, received: 0 };
    }
    record.report = report;
    record.receivedAt = now;
    record.pid = report.pid;
    for (const warning of report.warnings) this.noteOnce(record, report.rank, 'warning', warning);
    if (report.lastError) this.noteOnce(record, report.rank, 'error', report.lastError);
    this.version++;
    return true;
  }

  /** A line of the launcher's own (ringrun: ...), as it logs it. */
  launcherLine(text: string): void {
    const now = this.now();
    const spawned = /^rank (\d+)(?: on \S+)? spawned, pid (\d+)/.exec(text);
    if (spawned) {
      const record = this.ranks[Number(spawned[1])];
      if (record) record.pid = Number(spawned[2]);
      this.version++;
      return;
    }
    // The error a failed rank printed: it died of it, so it is its last error (the rank could not report it).
    const error = /^error of rank (\d+): (.*)$/.exec(text);
    const errorOf = error ? this.ranks[Number(error[1])] : undefined;
    if (errorOf) errorOf.error = error?.[2] as string;
    if (this.failureReport !== null && this.exitCode === null) {
      if (this.failureReport.length < kMaxReportLines) this.failureReport.push(text);
      this.version++;
      return;
    }
    if (text.startsWith('job failed:')) {
      this.failureReport = [text];
      this.addEvent({ t: now, level: 'error', rank: null, text });
      return;
    }
    // A local rank, a remote one ("on HOST ..."), or a browser rank ("(BROWSER) ...").
    const exited =
      /^rank (\d+) ((?:exited with code \d+|was killed by \w+|could not be started: .*|on \S+ .*?|\(.+?\) .*?)( before calling init\(\))?)(?:; stopping .*)?$/.exec(
        text,
      );
    if (exited) {
      const record = this.ranks[Number(exited[1])];
      const failed = exited[3] !== undefined || !/exited with code 0$/.test(exited[2] as string);
      if (record) record.exit = { text: exited[2] as string, failed };
      // A clean exit is said only with --verbose: not worth an event.
      if (failed) this.addEvent({ t: now, level: 'error', rank: Number(exited[1]), text });
      else this.version++;
      return;
    }
    this.addEvent({ t: now, level: /fail|kill|error/i.test(text) ? 'error' : 'info', rank: null, text });
  }

  /** The job is over: ringrun exits with `code` (the page says so, and keeps the last state). */
  ended(code: number): void {
    this.exitCode = code;
    this.version++;
  }

  get isOver(): boolean {
    return this.exitCode !== null;
  }

  /** The timeline files of the ranks on this host that write one. */
  timelineFiles(): string[] {
    const files: string[] = [];
    for (const { report } of this.ranks) if (report?.timelineFile && report.host === this.host) files.push(report.timelineFile);
    return files;
  }

  /** Appends the charts' point for now (called once a second). */
  sample(): void {
    const now = this.now();
    let collectives = 0;
    let sent = 0;
    let fresh = 0;
    const sentPerSec: number[] = [];
    const receivedPerSec: number[] = [];
    let samples: number | null = null;
    for (const record of this.ranks) {
      const live = record.report !== undefined && now - record.receivedAt <= kFreshMs && record.exit === null;
      sentPerSec.push(live ? record.rates.sent : 0);
      receivedPerSec.push(live ? record.rates.received : 0);
      if (!live) continue;
      fresh++;
      collectives += record.rates.collectives;
      sent += record.rates.sent;
      const rate = record.report?.training?.samplesPerSecond;
      if (rate !== undefined) samples = (samples ?? 0) + rate;
    }
    const training = this.trainingOf();
    const logs = training?.logs;
    this.points.push({
      t: now / 1000,
      collectivesPerSec: fresh > 0 ? collectives / fresh : 0,
      busBytesPerSec: fresh > 0 ? sent / fresh : 0,
      sentPerSec,
      receivedPerSec,
      loss: logs?.loss ?? null,
      accuracy: logs?.acc ?? logs?.accuracy ?? null,
      samplesPerSec: samples,
    });
    if (this.points.length > kMaxPoints) this.points.shift();
  }

  /** The chart points after `since` (seconds since the epoch; 0: all kept). */
  seriesSince(since: number): SeriesPoint[] {
    let i = this.points.length;
    while (i > 0 && (this.points[i - 1] as SeriesPoint).t > since) i--;
    return this.points.slice(i);
  }

  state(): DashboardState {
    const now = this.now();
    const training = this.trainingOf();
    return {
      job: {
        command: this.command,
        size: this.size,
        startedAt: this.startedAt,
        now,
        exitCode: this.exitCode,
        timeline: this.timelineFiles().length > 0,
      },
      ranks: this.ranks.map((record, rank) => this.row(record, rank, now)),
      events: [...this.events],
      failureReport: this.failureReport,
      training: training
        ? {
            epoch: training.epoch,
            batch: training.batch,
            epochs: training.epochs ?? null,
            batches: training.batches ?? null,
            logs: training.logs,
          }
        : null,
    };
  }

  private row(record: RankRecord, rank: number, now: number): RankRow {
    const report = record.report;
    const silentMs = report === undefined ? null : now - record.receivedAt;
    const pending = (report?.pending ?? []).map((p) => ({ ...p, waitedMs: p.waitedMs + (silentMs ?? 0) }));
    return {
      rank,
      host: report?.host ?? null,
      pid: record.pid,
      state: this.stateOf(record, pending, silentMs),
      completed: report?.stats?.completed ?? 0,
      failed: report?.stats?.failed ?? 0,
      collectivesPerSec: record.exit === null ? record.rates.collectives : 0,
      sentPerSec: record.exit === null ? record.rates.sent : 0,
      receivedPerSec: record.exit === null ? record.rates.received : 0,
      pendingCount: report?.stats?.pending ?? 0,
      pending,
      lastError: record.error ?? report?.lastError?.text ?? null,
      exit: record.exit?.text ?? null,
      silentMs,
    };
  }

  private stateOf(record: RankRecord, pending: PendingCall[], silentMs: number | null): RankState {
    if (record.exit !== null) return record.exit.failed ? 'failed' : 'finished';
    const report = record.report;
    if (report === undefined) return this.exitCode === null ? 'starting' : 'finished';
    if (report.state === 'failed' || report.state === 'finished') return report.state;
    if (this.exitCode !== null) return 'finished';
    if ((silentMs ?? 0) >= kStalledAfterMs) return 'stalled';
    if (pending.some((p) => p.waitedMs >= kStalledAfterMs)) return 'stalled';
    return report.state;
  }

  /** The training metrics to chart: rank 0's, else the lowest rank's that reports some. */
  private trainingOf(): RankReport['training'] {
    for (const record of this.ranks) if (record.report?.training) return record.report.training;
    return undefined;
  }

  private noteOnce(record: RankRecord, rank: number, level: 'warning' | 'error', note: { t: number; text: string }): void {
    const key = `${level}|${note.t}|${note.text}`;
    if (record.seen.has(key)) return;
    record.seen.add(key);
    if (record.seen.size > 1000) record.seen.clear();
    this.addEvent({ t: note.t, level, rank, text: note.text });
  }

  private addEvent(event: JobEvent): void {
    this.events.push(event);
    if (this.events.length > kMaxEvents) this.events.shift();
    this.version++;
  }
}
