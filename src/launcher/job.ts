/**
 * Runs the N ranks of a job, on this machine and over ssh, and watches them.
 *
 * Start-up: every rank must be running within `startTimeoutMs` (a local rank is at once; a
 * remote one once its bootstrap says so, remote_shell.ts), or the job fails naming the ranks
 * that did not start, with their last lines (usually ssh's error). When the launcher sees the
 * ranks' rendezvous (`startUp`, start_up.ts), every rank must also have called init() and
 * connected by then, and a rank that exits before calling init() fails the job at once.
 *
 * Fail fast: the first rank that exits non-zero, dies by a signal or cannot start fails the
 * job (unless it died of a peer's failure: then the job waits, briefly, for that peer to show
 * whether it failed too, and names it if it did; failure_cause.ts).
 * The launcher then gives the others up to a second to fail on their own (each learns of the dead
 * rank through its links within milliseconds, and its own error, naming that rank, is what its
 * output should end with), then stops those still running (SIGTERM to each local rank's process group, stdin
 * EOF to each remote rank's session; SIGKILL to whatever still runs after the grace period),
 * waits for them and reports that first failure. An interrupt (SIGINT/SIGTERM/SIGHUP to the
 * launcher) stops every rank the same way; a second interrupt kills at once. SIGTERM rather
 * than the signal received, because a non-interactive shell starts background commands with
 * SIGINT ignored: a forwarded SIGINT would leave `sh -c 'a & b'` ranks running until the
 * SIGKILL. When every rank has exited, processes they left in their groups are stopped too:
 * no process outlives the job.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { blamedPeer, type FailedRank, rootCause } from './failure_cause.js';
import { describeExit, failed, failureExitCode, lateRanksText, signalExitCode } from './failure_report.js';
import { RankProcess, type RankSpec } from './rank_process.js';
import type { RankExit, RankRunner } from './rank_runner.js';
import type { LateRank, StartUp } from './start_up.js';

const kDefaultKillGraceMs = 3000;
/** After SIGKILL, how long to wait before giving up on a process (stuck in the kernel). */
const kKillWaitMs = 2000;
/** How long output may still arrive after a rank's group is gone. */
const kDrainMs = 1000;
const kPollMs = 50;
/**
 * How long a rank that died of a peer's failure waits to be named the cause: until that peer
 * has exited and shown whether it failed too (a rank that throws exits a few milliseconds after
 * its peers see its connections close), at most this.
 */
const kCauseWaitMs = 2000;
/**
 * How long the surviving ranks of a failed job may take to fail on their own before they are
 * stopped: a rank stopped at once could be cut off before printing the error that names the
 * failed rank (it learns of it through its own links, as the launcher does).
 */
const kReportWindowMs = 1000;
/** How long a failed rank's last output may take to arrive after its exit, before it is read. */
const kOutputWaitMs = 1000;
/** ringrun's exit code when ranks did not start in time, as timeout(1)'s. */
export const kStartTimeoutExitCode = 124;

export interface JobOptions {
  /** One spec per rank that is a process, in rank order. */
  ranks: readonly RankSpec[];
  /** Ranks that are not processes of this launcher (browser tabs), after those of `ranks`. */
  otherRanks?: readonly RankRunner[];
  /** Every rank must be running by then. */
  startTimeoutMs: number;
  /** The launcher's own messages. */
  log(message: string): void;
  /** Messages shown with --verbose only. */
  debug(message: string): void;
  /** Called each time a rank starts running. */
  onStarted?(started: number): void;
  /** Called each time a rank's process exits. */
  onExit?(exit: RankExit): void;
  /** What is known of the ranks' init() (start_up.ts): said in failures, checked at the start-up deadline. */
  startUp?: Pick<StartUp, 'exitNote' | 'late'>;
  /** Called once, with the rank that failed first: the root cause (before the others are stopped). */
  onFailure?(failure: FailedRank): void;
  killGraceMs?: number;
}

export interface JobOutcome {
  /** What ringrun exits with: 0 only when every rank exited 0. */
  exitCode: number;
  /** The rank that failed first (the root cause), with its error and last lines of output. */
  failure?: FailedRank;
  /** Ranks that had not started, called init() or connected at the start-up deadline, with their last lines. */
  notStarted?: { rank: number; host: string | undefined; lastLines: string[]; why: LateRank['why'] }[];
  /** The signal that interrupted the launcher, when one did before any rank failed. */
  interruptedBy?: NodeJS.Signals;
  /** The exit code given to abort(), when the job was stopped from outside before any rank failed. */
  abortedWith?: number;
  exits: RankExit[];
  /** Ranks whose processes still ran after SIGKILL (stuck in the kernel). */
  survivors: number[];
}

export class Job {
  readonly finished: Promise<JobOutcome>;
  private readonly ranks: RankRunner[];
  private readonly killGraceMs: number;
  private failure: JobOutcome['failure'];
  private notStarted: JobOutcome['notStarted'];
  private interruptedBy: NodeJS.Signals | undefined;
  /** Set while a failed job's other ranks may still end on their own (stop()'s report window). */
  private endReportWindow: (() => void) | undefined;
  private abortedWith: number | undefined;
  private stopping: Promise<void> | undefined;
  private survivors: number[] = [];
  private startTimer: NodeJS.Timeout | undefined;
  /** The ranks that failed before the cause was known, in the order they exited. */
  private readonly failedRanks: FailedRank[] = [];
  /** Ranks that exited failing, whose last output is still being read. */
  private readonly reading = new Set<number>();
  /** Failed ranks in the order they exited (their output may be read in another). */
  private readonly exitOrder: number[] = [];
  private causeTimer: NodeJS.Timeout | undefined;
  /** The wait for a blamed peer is over: name the best known cause. */
  private waitOver = false;
  /** Resolves when the wait for a blamed peer ends: the cause is known, the time is up, or the job stops. */
  private waitEnded: Promise<void> | undefined;
  private endWait: () => void = () => {};

  constructor(private readonly options: JobOptions) {
    this.killGraceMs = options.killGraceMs ?? kDefaultKillGraceMs;
    this.ranks = options.ranks.map((spec): RankRunner => {
      const rank = new RankProcess(spec);
      const where = spec.remote ? ` on ${spec.remote.host}` : '';
      options.debug(`rank ${spec.rank}${where} spawned, pid ${rank.pid ?? '(none)'}`);
      return rank;
    });
    this.ranks.push(...(options.otherRanks ?? []));
    let started = 0;
    for (const rank of this.ranks) {
      void rank.started.then(() => {
        started++;
        options.onStarted?.(started);
        // With startUp, the deadline also holds for init().
        if (started === this.ranks.length && options.startUp === undefined) clearTimeout(this.startTimer);
      });
    }
    this.startTimer = setTimeout(() => this.onStartTimeout(), options.startTimeoutMs);
    this.finished = this.run();
  }

  /** Stops the job because the launcher received `signal`; a second call kills at once. */
  interrupt(signal: NodeJS.Signals): void {
    if (this.endReportWindow !== undefined) {
      // Stopping after a failure, still letting the ranks report it: stop them now.
      this.options.log(`received ${signal}: stopping every rank now`);
      this.endReportWindow();
      return;
    }
    if (this.stopping !== undefined) {
      this.options.log(`${signal} again: killing every rank now`);
      for (const rank of this.ranks) rank.stop('SIGKILL');
      return;
    }
    this.interruptedBy = signal;
    this.options.log(`received ${signal}: stopping ${plural(this.ranks.length, 'rank')}`);
    void this.stop();
  }

  /**
   * Stops every rank because of something outside the job (another node's failure): the ranks
   * stopped here are not failures, and the job's exit code is `exitCode`. Ignored once stopping.
   */
  abort(message: string, exitCode: number): void {
    if (this.stopping !== undefined) return;
    this.abortedWith = exitCode;
    const running = this.ranks.filter((rank) => rank.alive());
    this.options.log(running.length > 0 ? `${message}; stopping ${rankList(running)}` : message);
    void this.stop();
  }

  private async run(): Promise<JobOutcome> {
    const exits = await Promise.all(this.ranks.map((rank) => rank.exited.then((exit) => this.onExit(exit))));
    clearTimeout(this.startTimer);
    // A blamed peer of another launcher (per-node mode) may still be reported.
    await this.waitEnded;
    if (this.stopping === undefined && this.ranks.some((rank) => rank.alive())) {
      const left = this.ranks.filter((rank) => rank.alive());
      this.options.debug(`${rankList(left)} left processes in their process group; stopping them`);
      void this.stop();
    }
    await this.stopping;
    await Promise.all(this.ranks.map((rank) => rank.drain(kDrainMs)));
    return {
      exitCode: this.exitCode(),
      ...(this.failure !== undefined && { failure: this.failure }),
      ...(this.notStarted !== undefined && { notStarted: this.notStarted }),
      ...(this.interruptedBy !== undefined && { interruptedBy: this.interruptedBy }),
      ...(this.abortedWith !== undefined && { abortedWith: this.abortedWith }),
      exits,
      survivors: this.survivors,
    };
  }

  /**
   * Fails the job because `rank` exited with code 0 before calling init(), while the others
   * wait for it in theirs (start_up.ts).
   */
  exitedBeforeInit(rank: number): void {
    const process = this.ranks.find((r) => r.rank === rank);
    const exit = process?.exitStatus;
    if (process === undefined || exit === undefined || this.stopping !== undefined || this.failure !== undefined) return;
    this.failedRanks.push({ exit, note: ' before calling init()', ...process.failureLines() });
    this.decideCause();
  }

  private onStartTimeout(): void {
    if (this.stopping !== undefined) return;
    const notRunning: LateRank[] = this.ranks
      .filter((rank) => !rank.hasStarted && rank.alive())
      .map((rank) => ({ rank: rank.rank, why: 'did not start' }));
    const late = notRunning.length > 0 ? notRunning : (this.options.startUp?.late() ?? []);
    if (late.length === 0) return;
    this.notStarted = late.map(({ rank, why }) => {
      const process = this.ranks.find((r) => r.rank === rank);
      return { rank, host: process?.host, lastLines: process?.lastLines() ?? [], why };
    });
    this.options.log(`${lateRanksText(late)} within ${this.options.startTimeoutMs} ms (--start-timeout); stopping the job`);
    void this.stop();
  }

  private async onExit(exit: RankExit): Promise<RankExit> {
    this.options.onExit?.(exit);
    if (this.stopping !== undefined || !failed(exit)) {
      this.options.debug(`rank ${exit.rank} ${describeExit(exit)}`);
      // A blamed peer that exits cleanly did not fail.
      if (this.failedRanks.length > 0) this.decideCause();
      return exit;
    }
    const rank = this.ranks.find((r) => r.rank === exit.rank) as RankRunner;
    const note = this.options.startUp?.exitNote(exit.rank) || undefined;
    this.exitOrder.push(exit.rank);
    this.reading.add(exit.rank);
    await rank.outputEnded(kOutputWaitMs);
    this.reading.delete(exit.rank);
    const failure: FailedRank = { exit, ...rank.failureLines(), ...(note !== undefined && { note }) };
    if (this.stopping !== undefined) {
      this.options.debug(`rank ${exit.rank} ${describeExit(exit)}`);
      return exit;
    }
    this.failedRanks.push(failure);
    this.failedRanks.sort((a, b) => this.exitOrder.indexOf(a.exit.rank) - this.exitOrder.indexOf(b.exit.rank));
    if (failure.error !== undefined) this.options.debug(`error of rank ${exit.rank}: ${failure.error.summary}`);
    if (blamedPeer(failure) !== undefined) this.options.debug(`rank ${exit.rank} ${describeExit(exit)}`);
    if (this.causeTimer === undefined) {
      this.waitEnded = new Promise((resolve) => {
        this.endWait = resolve;
      });
      this.causeTimer = setTimeout(() => {
        this.waitOver = true;
        this.endWait();
        this.decideCause();
      }, kCauseWaitMs);
    }
    this.decideCause();
    return exit;
  }

  /** Fails the job once the root cause is known (every failed rank's output read). */
  private decideCause(): void {
    if (this.stopping !== undefined || this.failure !== undefined || this.reading.size > 0) return;
    const cause = rootCause(this.failedRanks, (peer) => !this.waitOver && this.mayStillFail(peer));
    if (cause === undefined) {
      const last = this.failedRanks[this.failedRanks.length - 1] as FailedRank;
      const peer = blamedPeer(last);
      this.options.debug(`waiting up to ${kCauseWaitMs} ms for rank ${peer} to exit: rank ${last.exit.rank} died of its failure`);
      return;
    }
    clearTimeout(this.causeTimer);
    this.endWait();
    this.failure = cause;
    this.options.onFailure?.(cause);
    const { exit } = cause;
    const others = this.ranks.filter((r) => r.rank !== exit.rank && r.alive());
    const stopping = others.length > 0 ? `; stopping the other ${plural(others.length, 'rank')}` : '';
    this.options.log(`rank ${exit.rank} ${describeExit(exit)}${cause.note ?? ''}${stopping}`);
    for (const other of others) {
      if (other.isStopped()) this.options.log(`rank ${other.rank} (pid ${other.pid}) is stopped (SIGSTOP or a debugger)`);
    }
    void this.stop(others.some((other) => !other.isStopped()) ? kReportWindowMs : 0);
  }

  /** Whether `peer`, blamed by a failed rank, may still show that it failed: it has not exited (nor stopped) yet. */
  private mayStillFail(peer: number): boolean {
    if (this.reading.has(peer)) return true;
    const rank = this.ranks.find((r) => r.rank === peer);
    // Not a rank of this launcher (the per-node mode): its own launcher reports it.
    if (rank === undefined) return true;
    return !rank.hasExited && !rank.isStopped();
  }

  private exitCode(): number {
    if (this.failure !== undefined) return failureExitCode(this.failure.exit);
    if (this.notStarted !== undefined) return kStartTimeoutExitCode;
    if (this.interruptedBy !== undefined) return signalExitCode(this.interruptedBy);
    if (this.abortedWith !== undefined) return this.abortedWith;
    return 0;
  }

  /**
   * Stops every rank gracefully, then kills what still runs after the grace period; with
   * `reportWindowMs`, first waits that long for the ranks to end on their own (an interrupt
   * ends the wait).
   */
  private stop(reportWindowMs = 0): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.startTimer);
      clearTimeout(this.causeTimer);
      this.endWait();
      if (reportWindowMs > 0) {
        const interrupted = new Promise<void>((resolve) => {
          this.endReportWindow = resolve;
        });
        const gone = await Promise.race([this.allGone(reportWindowMs), interrupted.then(() => false)]);
        this.endReportWindow = undefined;
        if (gone) return;
      }
      for (const rank of this.ranks) rank.stop('SIGTERM');
      if (await this.allGone(this.killGraceMs)) return;
      const stubborn = this.ranks.filter((rank) => rank.alive());
      this.options.log(`${rankList(stubborn)} still running after ${this.killGraceMs} ms; sending SIGKILL`);
      for (const rank of stubborn) rank.stop('SIGKILL');
      if (await this.allGone(kKillWaitMs)) return;
      const survivors = this.ranks.filter((rank) => rank.alive());
      this.survivors = survivors.map((rank) => rank.rank);
      this.options.log(`processes of ${rankList(survivors)} survived SIGKILL; giving up on them`);
    })();
    return this.stopping;
  }

  /** Polls until no rank has a running process, for at most `timeoutMs`. */
  private async allGone(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.ranks.some((rank) => rank.alive())) return true;
      if (Date.now() >= deadline) return false;
      await sleep(kPollMs);
    }
  }
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function rankList(ranks: readonly RankRunner[]): string {
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${ranks.map((rank) => rank.rank).join(', ')}`;
}
