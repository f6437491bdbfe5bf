/**
 * One rank's process, as ringrun sees it: the rank itself (a local rank) or the ssh session
 * that runs it on another host (remote_shell.ts). Either is spawned as the leader of its own
 * process group; its output is prefixed with the rank and its last lines kept.
 *
 * Stopping: a local rank's group gets the signal (and SIGCONT after SIGTERM, so that a stopped
 * rank can act on it). A remote rank is stopped by ending its session's stdin, which makes the
 * remote bootstrap terminate it; SIGKILL also kills the local ssh process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { ProcessGuard } from './orphan_guard.js';
import { OutputPrefixer, rankPrefix } from './output_prefixer.js';
import { groupAlive, processState, signalGroup } from './process_group.js';
import { findRankError, linesToShow, type RankError } from './rank_error.js';
import type { RankExit, RankRunner, RankSinks } from './rank_runner.js';
import { TailBuffer } from './tail_buffer.js';

/** Lines kept of a rank's output: enough to find the error it died of among the frames and properties printed after it. */
const kKeptLines = 60;

export type { RankExit, RankSinks } from './rank_runner.js';

export interface RankSpec {
  rank: number;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  sinks: RankSinks;
  tailLines: number;
  /** A remote rank: the host, the script for the session's stdin, and the line that says it started. */
  remote?: { host: string; stdin: string; marker: string };
  /** Stops the rank's group should ringrun die without doing so (orphan_guard.ts). */
  guard?: ProcessGuard;
}

export class RankProcess implements RankRunner {
  readonly rank: number;
  readonly pid: number | undefined;
  readonly host: string | undefined;
  /** Resolves when the rank's own process ends (its group may outlive it) or fails to start. */
  readonly exited: Promise<RankExit>;
  /** Resolves once the rank runs: at once for a local rank, at the marker for a remote one. */
  readonly started: Promise<void>;
  private isStarted = false;
  private readonly child: ChildProcess | undefined;
  private readonly tail: TailBuffer;
  private readonly tailLines: number;
  private readonly outputClosed: Promise<void>;
  private exit: RankExit | undefined;

  constructor(spec: RankSpec) {
    this.rank = spec.rank;
    this.host = spec.remote?.host;
    this.tailLines = spec.tailLines;
    this.tail = new TailBuffer(Math.max(spec.tailLines, kKeptLines));
    let child: ChildProcess | undefined;
    try {
      child = spawn(spec.command, [...spec.args], {
        env: spec.env,
        stdio: [spec.remote ? 'pipe' : 'ignore', 'pipe', 'pipe'],
        detached: true,
      });
    } catch (error) {
      // spawn throws for some failures (E2BIG: the environment or arguments are too long)
      // and reports the others (ENOENT, EACCES, EAGAIN) through 'error': both fail the rank.
      this.exit = { rank: this.rank, pid: undefined, code: null, signal: null, spawnError: error as NodeJS.ErrnoException };
    }
    this.child = child;
    this.pid = child?.pid;
    const pid = this.pid;
    // A remote rank's bootstrap stops it when the session's stdin ends, which ringrun's death
    // causes; a SIGTERM to the session's group could kill that bootstrap first (an ssh command
    // that runs it here, such as the tests' netns-ssh), so only local ranks are guarded.
    if (pid !== undefined && spec.remote === undefined) spec.guard?.watch(pid, `rank ${spec.rank}`);
    let markStarted: () => void = () => {};
    this.started = new Promise((resolve) => {
      markStarted = () => {
        this.isStarted = true;
        resolve();
      };
    });
    if (spec.remote === undefined && this.pid !== undefined) markStarted();
    if (spec.remote !== undefined && child?.stdin) {
      child.stdin.on('error', () => {}); // the session may end before we stop writing
      child.stdin.write(spec.remote.stdin);
    }
    const marker = spec.remote?.marker;
    const onLine = (line: string): boolean => {
      if (marker !== undefined && !this.isStarted && line === marker) {
        markStarted();
        return false;
      }
      this.tail.push(line);
      spec.sinks.line?.(line);
      return true;
    };
    const prefix = rankPrefix(spec.rank);
    this.outputClosed = Promise.all([
      forward(child?.stdout ?? null, new OutputPrefixer(prefix, spec.sinks.stdout, onLine)),
      forward(child?.stderr ?? null, new OutputPrefixer(prefix, spec.sinks.stderr, onLine)),
    ]).then(() => undefined);
    this.exited = new Promise((resolve) => {
      if (child === undefined) {
        if (this.exit !== undefined) resolve(this.exit);
        return;
      }
      child.once('exit', (code, signal) => {
        this.exit = { rank: this.rank, pid: this.pid, code, signal, ...(this.host !== undefined && { host: this.host }) };
        if (pid !== undefined && spec.remote === undefined) spec.guard?.unwatch(pid);
        child.stdin?.destroy(); // lets a remote watcher still holding the pipe go
        resolve(this.exit);
      });
      child.on('error', (error: NodeJS.ErrnoException) => {
        // Also emitted when a kill fails; only a failed spawn ends the rank.
        if (this.pid !== undefined || this.exit !== undefined) return;
        this.exit = { rank: this.rank, pid: undefined, code: null, signal: null, spawnError: error };
        resolve(this.exit);
      });
    });
  }

  get hasStarted(): boolean {
    return this.isStarted;
  }

  /** Whether the rank's own process has ended (its group may still run). */
  get hasExited(): boolean {
    return this.exit !== undefined;
  }

  /** How the rank's own process ended, once it has. */
  get exitStatus(): RankExit | undefined {
    return this.exit;
  }

  /** Whether the rank (for a remote rank: its ssh session), or anything left in its group, still runs. */
  alive(): boolean {
    if (this.pid === undefined) return false;
    return this.exit === undefined || groupAlive(this.pid);
  }

  /** Stops the rank: SIGTERM (gracefully) or SIGKILL. */
  stop(signal: 'SIGTERM' | 'SIGKILL'): void {
    if (this.pid === undefined) return;
    if (this.host !== undefined) {
      this.child?.stdin?.end();
      if (signal === 'SIGKILL') signalGroup(this.pid, 'SIGKILL');
      return;
    }
    signalGroup(this.pid, signal);
    if (signal === 'SIGTERM') signalGroup(this.pid, 'SIGCONT');
  }

  /** Whether a local rank is stopped (SIGSTOP; /proc state T): worth saying when the job fails. */
  isStopped(): boolean {
    if (this.host !== undefined || this.pid === undefined || this.exit !== undefined) return false;
    return processState(this.pid)?.state === 'T';
  }

  lastLines(): string[] {
    const lines = this.tail.toArray();
    return lines.slice(Math.max(0, lines.length - this.tailLines));
  }

  /** The error the rank printed last (rank_error.ts), and its last lines up to that error's first frames. */
  failureLines(): { error: RankError | undefined; lastLines: string[] } {
    const lines = this.tail.toArray();
    const error = findRankError(lines);
    return { error, lastLines: linesToShow(lines, error, this.tailLines) };
  }

  /** Resolves once stdout and stderr have ended, or after `timeoutMs` (a process left in the group may hold them open). */
  async outputEnded(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.outputClosed, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /**
   * Waits up to `timeoutMs` for stdout and stderr to reach their end, then cuts them: a
   * process that left the group (a daemon) may hold the pipes open forever.
   */
  async drain(timeoutMs: number): Promise<void> {
    await this.outputEnded(timeoutMs);
    this.child?.stdout?.destroy();
    this.child?.stderr?.destroy();
    this.child?.stdin?.destroy();
    await this.outputClosed;
  }
}

/** Feeds a pipe into a prefixer; resolves once the pipe closed and the last partial line went out. */
function forward(stream: Readable | null, prefixer: OutputPrefixer): Promise<void> {
  if (stream === null) return Promise.resolve();
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => prefixer.push(chunk));
    stream.on('error', () => {}); // a broken pipe ends the output; 'close' follows
    stream.once('close', () => {
      prefixer.end();
      resolve();
    });
  });
}
