/**
 * What the launcher's Job watches of one rank, whatever runs it: a process on this machine or
 * over ssh (rank_process.ts), or a browser tab (browser/browser_rank.ts).
 */
import type { RankError } from './rank_error.js';

/** How one rank ended. */
export interface RankExit {
  rank: number;
  pid: number | undefined;
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (command not found, not executable). */
  spawnError?: NodeJS.ErrnoException;
  /** The host of a remote rank (its code came through ssh). */
  host?: string;
  /** A rank that is not a process (a browser tab) says how it ended in words. */
  reason?: string;
}

/** Where a rank's output goes. */
export interface RankSinks {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Every line of both streams, unprefixed (for --output-dir). */
  line?(line: string): void;
}

export interface RankRunner {
  readonly rank: number;
  /** The process id, for a rank that is a process of this machine (or its ssh session). */
  readonly pid: number | undefined;
  /** Where the rank runs when not on this machine (a remote host, a browser): for reports. */
  readonly host: string | undefined;
  /** Resolves once the rank runs. */
  readonly started: Promise<void>;
  /** Resolves when the rank has ended (or could not start). */
  readonly exited: Promise<RankExit>;
  readonly hasStarted: boolean;
  /** Whether the rank itself has ended (a process: its group may still run). */
  readonly hasExited: boolean;
  /** How the rank ended, once it has. */
  readonly exitStatus: RankExit | undefined;
  /** Whether the rank, or anything it left running, still runs. */
  alive(): boolean;
  /** Stops the rank: gracefully (SIGTERM) or at once (SIGKILL). */
  stop(signal: 'SIGTERM' | 'SIGKILL'): void;
  /** Whether the rank is stopped (SIGSTOP or a debugger): worth saying when the job fails. */
  isStopped(): boolean;
  lastLines(): string[];
  /** The error the rank printed last (rank_error.ts), and its last lines up to that error's first frames. */
  failureLines(): { error: RankError | undefined; lastLines: string[] };
  /** Resolves once the rank's output has ended, or after `timeoutMs`. */
  outputEnded(timeoutMs: number): Promise<void>;
  /** Waits up to `timeoutMs` for the rank's output to end, then cuts it. */
  drain(timeoutMs: number): Promise<void>;
}
