/**
 * Repeated calls: a training loop calls the same named collective on the same arrays with the
 * same options every step, and checking those arguments again each time (the tensor's type, the
 * output's memory and length, every option) would find what it found before. A call whose
 * preparation says it may repeat (Prepared.again) is remembered under its name; a later call of
 * that name with the very same tensor object, the same lengths and option values identical one by
 * one reuses the checked preparation and only redoes its per-call work (the input copy).
 *
 * What may change between two calls and is looked at again: the tensor's and the output's lengths
 * (a view of a growable buffer follows its buffer) and every option value. What cannot change
 * without a new object: a typed array's type and buffer. Process sets are compared as objects and
 * a removed set's calls are forgotten (forgetSet), so a repeat never runs in a set that is gone.
 */
import type { TypedArray } from '../core/types.js';
import type { Prepared } from './call.js';
import type { Completion } from './engine_client.js';

/** Names remembered at most; past it the map starts over (a loop with ever new names). */
const kMaxRemembered = 4096;

/** How a repeated call settles (made at its first repeat, reused by the next: one call of a name is in flight at a time). */
export interface RepeatSettlement {
  done: (completion: Completion) => unknown;
  failed: (error: unknown) => never;
}

/** A remembered call: what it was given, its checked preparation, and how its repeats settle. */
export interface Remembered {
  /** The preparation function that made it: a name reused by another op is another call. */
  readonly op: unknown;
  readonly tensor: TypedArray;
  readonly length: number;
  /** The options' own values, in the order the caller wrote them. */
  readonly keys: readonly string[];
  readonly values: readonly unknown[];
  /** The output's length when the call had one (`prepared.buffer` is it). */
  readonly outLength: number;
  readonly prepared: Prepared;
  /** The process set the call ran in (undefined: the world). */
  readonly set: number | undefined;
  /** Set by the caller's first repeat of it (calls.ts). */
  settlement?: RepeatSettlement;
}

export class Repeats {
  private readonly byName = new Map<string, Remembered>();

  /** The remembered call that this one repeats, else undefined. */
  find(op: unknown, tensor: unknown, options: unknown): Remembered | undefined {
    if (typeof options !== 'object' || options === null) return undefined;
    const name = (options as { name?: unknown }).name;
    if (typeof name !== 'string') return undefined;
    const last = this.byName.get(name);
    if (
      last === undefined ||
      last.op !== op ||
      last.tensor !== tensor ||
      last.tensor.length !== last.length ||
      (last.prepared.buffer as TypedArray).length !== last.outLength ||
      Object.getPrototypeOf(options) !== Object.prototype
    )
      return undefined;
    const given = options as Record<string, unknown>;
    const { keys, values } = last;
    let i = 0;
    // for-in allocates nothing; an option added, removed or changed is a different call.
    for (const key in given) {
      if (keys[i] !== key || values[i] !== given[key]) return undefined;
      i++;
    }
    return i === keys.length ? last : undefined;
  }

  /** Remembers a call that may repeat (its preparation set `again`), replacing its name's last one. */
  remember(op: unknown, tensor: unknown, options: unknown, prepared: Prepared): void {
    if (prepared.again === undefined || !ArrayBuffer.isView(tensor) || prepared.buffer === undefined) return;
    if (typeof options !== 'object' || options === null || Object.getPrototypeOf(options) !== Object.prototype) return;
    const given = options as Record<string, unknown>;
    if (typeof given.name !== 'string') return;
    if (this.byName.size >= kMaxRemembered && !this.byName.has(given.name)) this.byName.clear();
    const keys: string[] = [];
    const values: unknown[] = [];
    for (const key in given) {
      keys.push(key);
      values.push(given[key]);
    }
    const typed = tensor as TypedArray;
    this.byName.set(given.name, {
      op,
      tensor: typed,
      length: typed.length,
      keys,
      values,
      outLength: prepared.buffer.length,
      prepared,
      set: prepared.set,
    });
  }

  /** Process set `id` was removed: its calls are not repeated. */
  forgetSet(id: number): void {
    for (const [name, remembered] of this.byName) if (remembered.set === id) this.byName.delete(name);
  }

  clear(): void {
    this.byName.clear();
  }
}
