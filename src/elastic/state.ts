/**
 * ObjectState (Horovod's hvd.elastic.ObjectState): the values a training loop must not lose when
 * the membership changes. `commit()` keeps a copy (typed arrays copied, other values
 * structured-cloned) and is where a change of membership is noticed; `restore()` goes back to the
 * last commit; `sync()` makes every rank's values rank 0's. elastic.run (run.ts) ties them together.
 */

import { runtime as defaultRuntime } from '../api/default_runtime.js';
import type { RingReduce } from '../api/runtime.js';
import { RingReduceError } from '../core/errors.js';

/** Thrown by commit() on every rank at once when the launcher has a new membership (new workers). */
export class HostsUpdatedInterrupt extends RingReduceError {
  override name = 'HostsUpdatedInterrupt';
}

/** Options of `new ObjectState(values, options)`: the runtime, and how often a commit looks for new workers. */
export interface StateOptions {
  /** The runtime the state syncs over. Default: the module's (rr.init()). */
  runtime?: RingReduce;
  /** How often a commit asks the launcher's store for a new membership, at most. Default 500 ms. */
  checkIntervalMs?: number;
}

const kDefaultCheckIntervalMs = 500;

function copyOf<T>(value: T): T {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) return (value as unknown as { slice(): T }).slice();
  return structuredClone(value);
}

export class State<T extends object = Record<string, unknown>> {
  #committed: T;
  readonly #keys: readonly (keyof T & string)[];
  readonly #resets: (() => void | Promise<void>)[] = [];
  readonly #options: StateOptions;
  #commits = 0;

  constructor(values: T, options: StateOptions = {}) {
    this.#keys = Object.keys(values) as (keyof T & string)[];
    for (const key of this.#keys) {
      if (key in this) throw new RingReduceError(`ObjectState: '${key}' is the name of one of its methods`);
    }
    Object.assign(this, values);
    this.#options = options;
    this.#committed = this.snapshot();
  }

  /** The runtime the state syncs over. */
  get runtime(): RingReduce {
    return this.#options.runtime ?? defaultRuntime();
  }

  /** Calls `callback` after every change of membership, once the state is restored and synced. */
  onReset(callback: () => void | Promise<void>): void {
    this.#resets.push(callback);
  }

  /**
   * Keeps a copy of the values to roll back to, then asks whether the launcher has a new
   * membership; if it has (new workers to let in), throws HostsUpdatedInterrupt on every rank at
   * once (elastic.run lets them in). A collective: every rank commits at the same points.
   */
  async commit(): Promise<void> {
    this.#committed = this.snapshot();
    this.#commits++;
    const rr = this.runtime;
    if (rr.generation() === 0) return;
    const latest = await rr.latestGeneration(this.#options.checkIntervalMs ?? kDefaultCheckIntervalMs);
    // Every rank must leave at the same commit: the newest generation any rank has seen decides.
    const seen = await rr.allreduce(new Float64Array([latest]), { name: 'elastic/commit', op: 'max' });
    if ((seen[0] as number) > rr.generation()) {
      throw new HostsUpdatedInterrupt(`generation ${seen[0]} has new workers (this is generation ${rr.generation()})`);
    }
  }

  /** Goes back to the values of the last commit (or of the constructor); a subclass may finish asynchronously. */
  restore(): void | Promise<void> {
    Object.assign(this, this.copy(this.#committed));
  }

  /** Makes every rank's values those of rank 0 (a collective). */
  async sync(): Promise<void> {
    const values = await this.runtime.broadcastObject(this.snapshot(), { root: 0, name: 'elastic/sync' });
    Object.assign(this, values);
  }

  /** Commits made so far (for tests and diagnostics). */
  get commits(): number {
    return this.#commits;
  }

  /** @internal elastic.run: after a change of membership. */
  async reset(): Promise<void> {
    for (const callback of this.#resets) await callback();
  }

  private snapshot(): T {
    const values = {} as T;
    for (const key of this.#keys) values[key] = copyOf((this as unknown as T)[key]);
    return values;
  }

  private copy(values: T): T {
    const out = {} as T;
    for (const key of this.#keys) out[key] = copyOf(values[key]);
    return out;
  }
}

/** A state whose values are its own properties: `state.step`, `state.weights`. */
export type ObjectState<T extends object> = State<T> & T;

/** @example const state = new rr.elastic.ObjectState({ epoch: 0, step: 0, weights }); state.step++; */
export const ObjectState = State as unknown as new <T extends object>(values: T, options?: StateOptions) => ObjectState<T>;
