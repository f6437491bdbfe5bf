/**
 * Runs the N ranks of a job on this machine and watches them.
 *
 * Fail fast: the first rank that exits non-zero, dies by a signal or cannot start fails the
 * job. The launcher then stops the others (SIGTERM to each rank's process group, SIGKILL to
 * whatever still runs after the grace period), waits for them and reports that first failure.
 * An interrupt (SIGINT/SIGTERM/SIGHUP to the launcher) stops every rank the same way; a
 * second interrupt sends SIGKILL at once. SIGTERM rather than the signal received, because a
 * non-interactive shell starts background commands with SIGINT ignored: a forwarded SIGINT
 * would leave `sh -c 'a & b'` ranks running until the SIGKILL. When every
 * rank has exited, processes they left in their groups are stopped too: no process outlives
 * the job.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type JobContract, localPlacements, rankEnv } from './env_contract.js';
import { describeExit, failed, failureExitCode, signalExitCode } from './failure_report.js';
import { type RankExit, RankProcess, type RankSinks } from './rank_process.js';

const kDefaultKillGraceMs = 3000;
/** After SIGKILL, how long to wait before giving up on a process (stuck in the kernel). */
const kKillWaitMs = 2000;
/** How long output may still arrive after a rank's group is gone. */
const kDrainMs = 1000;
const kPollMs = 50;
const kDefaultTailLines = 10;

export interface LocalJobOptions {
  command: string;
  args: readonly string[];
  /** The job; its size is the number of ranks started. */
  job: JobContract;
  /** The environment every rank inherits before the contract is written over it. */
  baseEnv: NodeJS.ProcessEnv;
  /** Where rank `rank`'s output goes. */
  sinks(rank: number): RankSinks;
  /** The launcher's own messages. */
  log(message: string): void;
  /** Messages shown with --verbose only. */
  debug(message: string): void;
  killGraceMs?: number;
  tailLines?: number;
}

export interface JobOutcome {
  /** What ringrun exits with: 0 only when every rank exited 0. */
  exitCode: number;
  /** The first rank that failed, with its last lines of output. */
  failure?: { exit: RankExit; lastLines: string[] };
  /** The signal that interrupted the launcher, when one did before any rank failed. */
  interruptedBy?: NodeJS.Signals;
  exits: RankExit[];
  /** Ranks whose process group still had processes after SIGKILL (stuck in the kernel). */
  survivors: number[];
}

export class LocalJob {
  readonly finished: Promise<JobOutcome>;
  private readonly ranks: RankProcess[];
  private readonly killGraceMs: number;
  private failure: JobOutcome['failure'];
  private interruptedBy: NodeJS.Signals | undefined;
  private stopping: Promise<void> | undefined;
  private survivors: number[] = [];

  constructor(private readonly options: LocalJobOptions) {
    this.killGraceMs = options.killGraceMs ?? kDefaultKillGraceMs;
    const tailLines = options.tailLines ?? kDefaultTailLines;
    this.ranks = localPlacements(options.job.size).map((placement) => {
      const rank = new RankProcess({
        rank: placement.rank,
        command: options.command,
        args: options.args,
        env: rankEnv(options.baseEnv, options.job, placement),
        sinks: options.sinks(placement.rank),
        tailLines,
      });
      options.debug(`rank ${placement.rank} started, pid ${rank.pid ?? '(none)'}`);
      return rank;
    });
    this.finished = this.run();
  }

  /** Stops the job because the launcher received `signal`; a second call kills at once. */
  interrupt(signal: NodeJS.Signals): void {
    if (this.stopping !== undefined) {
      this.options.log(`${signal} again: killing every rank now`);
      for (const rank of this.ranks) rank.signal('SIGKILL');
      return;
    }
    this.interruptedBy = signal;
    this.options.log(`received ${signal}: stopping ${plural(this.ranks.length, 'rank')}`);
    void this.stop('SIGTERM');
  }

  private async run(): Promise<JobOutcome> {
    const exits = await Promise.all(this.ranks.map((rank) => rank.exited.then((exit) => this.onExit(exit))));
    if (this.stopping === undefined && this.ranks.some((rank) => rank.alive())) {
      const left = this.ranks.filter((rank) => rank.alive());
      this.options.debug(`${rankList(left)} left processes in their process group; stopping them`);
      void this.stop('SIGTERM');
    }
    await this.stopping;
    await Promise.all(this.ranks.map((rank) => rank.drain(kDrainMs)));
    return {
      exitCode: this.exitCode(),
      ...(this.failure !== undefined && { failure: this.failure }),
      ...(this.interruptedBy !== undefined && { interruptedBy: this.interruptedBy }),
      exits,
      survivors: this.survivors,
    };
  }

  private onExit(exit: RankExit): RankExit {
    if (this.stopping !== undefined || !failed(exit)) {
      this.options.debug(`rank ${exit.rank} ${describeExit(exit)}`);
    } else {
      const rank = this.ranks[exit.rank];
      this.failure = { exit, lastLines: rank?.lastLines() ?? [] };
      const others = this.ranks.filter((r) => r !== rank && r.alive()).length;
      const stopping = others > 0 ? `; stopping the other ${plural(others, 'rank')}` : '';
      this.options.log(`rank ${exit.rank} ${describeExit(exit)}${stopping}`);
      void this.stop('SIGTERM');
    }
    return exit;
  }

  private exitCode(): number {
    if (this.failure !== undefined) return failureExitCode(this.failure.exit);
    if (this.interruptedBy !== undefined) return signalExitCode(this.interruptedBy);
    return 0;
  }

  /** Signals every rank's group, then SIGKILLs what still runs after the grace period. */
  private stop(signal: NodeJS.Signals): Promise<void> {
    this.stopping ??= (async () => {
      for (const rank of this.ranks) rank.signal(signal);
      if (await this.allGone(this.killGraceMs)) return;
      const stubborn = this.ranks.filter((rank) => rank.alive());
      this.options.log(`${rankList(stubborn)} still running after ${this.killGraceMs} ms; sending SIGKILL`);
      for (const rank of stubborn) rank.signal('SIGKILL');
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

function rankList(ranks: readonly RankProcess[]): string {
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${ranks.map((rank) => rank.rank).join(', ')}`;
}
