/**
 * What the facade needs of the platform it runs on: the rank's environment, the engine's thread
 * (starting it, talking to it, and taking its completions while the caller blocks in a ...Sync
 * call), and the few other things only one platform has.
 *
 * The platform is chosen when the package is resolved, not at run time and not by a side
 * effect: package.json maps `#platform` to node/node_platform.ts by default and to
 * browser/browser_platform.ts under the `browser` condition (a bundler's: esbuild
 * --platform=browser). Both export `platform` of the type below, so they cannot drift apart,
 * and a browser bundle holds nothing of Node's. TypeScript, resolving `#platform` under its
 * NodeNext conditions, type-checks the api against the Node one; each is checked against this
 * interface where it is defined.
 */
import type { Config } from '../core/config.js';
import type { RingReduceError } from '../core/errors.js';
import type { Collect } from '../core/shared_memory_reclaimer.js';
import type { EngineInit, FromEngine, ToEngine } from '../engine/threads/worker_protocol.js';

/** The variables of the environment contract (docs/env.md), as this rank got them. */
export type Environment = Readonly<Record<string, string | undefined>>;

export interface Platform {
  readonly name: 'node' | 'browser';
  /** The rank's environment: process.env on Node; in a browser, what ringrun's page posts the program worker. */
  environment(): Promise<Environment>;
  /** Starts the engine's thread with `init`; `events` hears what it posts, on this thread's event loop. */
  startEngine(init: EngineInit, events: EngineEvents): EngineThread;
  /** This thread's garbage collector, for the reclaimer of fresh shared memory (Node: V8's); undefined where there is none. */
  collector(): Collect | undefined;
  /**
   * The program's own arguments: process.argv after the script on Node; in a browser rank, the
   * same words from ringrun's command line (the page puts them in the program worker's URL).
   */
  programArgs(): readonly string[];
  /** Whether this thread may block in Atomics.wait (a browser page's main thread may not). */
  mayBlock(): boolean;
  /** Joins an elastic job (ringrun --elastic) as worker `id`: its generations come from the launcher's store. */
  joinElastic(config: Config, id: string): Promise<ElasticMembership>;
  /**
   * The rank has shut down for good (shutdown() resolved; an elastic re-form is not one). A
   * browser rank tells its page, for which the rank has then ended; Node has nothing to do.
   */
  rankClosed(): void;
  /**
   * Runs `task` once the program has nothing left to do and has not shut down (Node: the event
   * loop empties, 'beforeExit'), so that a program ending without shutdown() leaves the job as
   * shutdown() does, as Horovod's exit hook does; returns what cancels it. A browser: nothing
   * (its page ends a rank once shutdown() resolved, docs/browser.md).
   */
  atProgramEnd(task: () => Promise<void>): () => void;
}

/** What the engine's thread tells the caller's, as it happens. */
export interface EngineEvents {
  /** The completions of one turn of the engine (a message it posted). */
  messages(batch: readonly FromEngine[]): void;
  /** The engine's thread is gone (it crashed, exited, or could not be started). */
  gone(error: RingReduceError): void;
}

/** The caller's side of the engine's thread. */
export interface EngineThread {
  /** Hands the engine submissions or the shutdown request. */
  post(message: ToEngine): void;
  /**
   * What this thread can take of the engine's completions without its event loop, for the
   * ...Sync call `id` it blocks in: Node drains the completion port (every message, in order);
   * a browser reads the sync mailbox (that call's completion, or 'closed').
   */
  takeSync(id: number): readonly FromEngine[];
  /** Whether the engine keeps the process alive: while calls are pending (Node; nothing to do in a browser). */
  keepAlive(alive: boolean): void;
  /** Stops the thread (after the engine said 'closed', or it failed to start). */
  terminate(): Promise<void>;
}

/** An elastic worker's membership: the generations of the job that list it. */
export interface ElasticMembership {
  /** The generation this worker runs in (1, 2, ...; 0 before the first). */
  readonly generation: number;
  /** Waits for the next generation that lists this worker; its configuration (rank, size, job id). */
  next(): Promise<Config>;
  /** The newest generation the launcher has published, asked of its store at most every `maxAgeMs`. */
  latest(maxAgeMs: number): Promise<number>;
  close(): Promise<void>;
}
