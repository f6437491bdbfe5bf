import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { OutputPrefixer, rankPrefix } from './output_prefixer.js';
import { groupAlive, signalGroup } from './process_group.js';
import { TailBuffer } from './tail_buffer.js';

/** How one rank ended. */
export interface RankExit {
  rank: number;
  pid: number | undefined;
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (command not found, not executable). */
  spawnError?: NodeJS.ErrnoException;
}

/** Where a rank's output goes. */
export interface RankSinks {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Every line of both streams, unprefixed (for --output-dir). */
  line?(line: string): void;
}

export interface RankSpec {
  rank: number;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  sinks: RankSinks;
  tailLines: number;
}

/**
 * One rank's process: spawned as the leader of its own process group, its output prefixed
 * with the rank and its last lines kept. stdin is /dev/null: no rank reads the terminal.
 */
export class RankProcess {
  readonly rank: number;
  readonly pid: number | undefined;
  /** Resolves when the rank's own process ends (its group may outlive it) or fails to start. */
  readonly exited: Promise<RankExit>;
  private readonly child: ChildProcess | undefined;
  private readonly tail: TailBuffer;
  private readonly outputClosed: Promise<void>;
  private exit: RankExit | undefined;

  constructor(spec: RankSpec) {
    this.rank = spec.rank;
    this.tail = new TailBuffer(spec.tailLines);
    let child: ChildProcess | undefined;
    try {
      child = spawn(spec.command, [...spec.args], { env: spec.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    } catch (error) {
      // spawn throws for some failures (E2BIG: the environment or arguments are too long)
      // and reports the others (ENOENT, EACCES, EAGAIN) through 'error': both fail the rank.
      this.exit = { rank: this.rank, pid: undefined, code: null, signal: null, spawnError: error as NodeJS.ErrnoException };
    }
    this.child = child;
    this.pid = child?.pid;
    const onLine = (line: string): void => {
      this.tail.push(line);
      spec.sinks.line?.(line);
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
        this.exit = { rank: this.rank, pid: this.pid, code, signal };
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

  /** Whether the rank, or anything it left in its process group, still runs. */
  alive(): boolean {
    if (this.pid === undefined) return false;
    return this.exit === undefined || groupAlive(this.pid);
  }

  /** Signals the rank's whole process group. */
  signal(signal: NodeJS.Signals): void {
    if (this.pid !== undefined) signalGroup(this.pid, signal);
  }

  lastLines(): string[] {
    return this.tail.toArray();
  }

  /**
   * Waits up to `timeoutMs` for stdout and stderr to reach their end, then cuts them: a
   * process that left the group (a daemon) may hold the pipes open forever.
   */
  async drain(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([this.outputClosed, timeout]);
    clearTimeout(timer);
    this.child?.stdout?.destroy();
    this.child?.stderr?.destroy();
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
