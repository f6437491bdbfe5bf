/**
 * Repeated calls: a training loop calls the same named collective on the same arrays with the
 * same options every step, and checking those arguments again each time (the tensor's type, the
 * output's memory and length, every option) would find what it found before. A call whose
 * preparation says it may repeat (Prepared.again: every member's, for a grouped call) is
 * remembered under its name; a later call of that name with the very same tensor objects (a
 * group's in the same order, in any array), the same lengths and option values identical one by
 * one (arrays element by element) reuses the checked preparation and only redoes its per-call
 * work (the input copies).
 *
 * What may change between two calls and is looked at again: the tensors' and outputs' lengths
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
export interface Remembered<P> {
  /** The preparation function that made it: a name reused by another op is another call. */
  readonly op: unknown;
  /** The tensor, or a group's tensors in order, and their lengths then. */
  readonly tensors: readonly TypedArray[];
  readonly lengths: readonly number[];
  /** The options' own values, in the order the caller wrote them (arrays as copies). */
  readonly keys: readonly string[];
  readonly values: readonly unknown[];
  /** The calls' outputs (`buffer`) and their lengths then. */
  readonly outputs: readonly TypedArray[];
  readonly outLengths: readonly number[];
  /** The call's preparation, or every member's. */
  readonly prepared: P;
  /** The process set the call ran in (undefined: the world). */
  readonly set: number | undefined;
  /** Set by the caller's first repeat of it (calls.ts). */
  settlement?: RepeatSettlement;
}

/** Remembered calls of one kind: single calls (P = Prepared) or grouped ones (P = Prepared[]). */
export class Repeats<P extends Prepared | readonly Prepared[]> {
  private readonly byName = new Map<string, Remembered<P>>();

  /** The remembered call that this one repeats, else undefined. */
  find(op: unknown, argument: unknown, options: unknown): Remembered<P> | undefined {
    if (typeof options !== 'object' || options === null) return undefined;
    const name = (options as { name?: unknown }).name;
    if (typeof name !== 'string') return undefined;
    const last = this.byName.get(name);
    if (last === undefined || last.op !== op || Object.getPrototypeOf(options) !== Object.prototype) return undefined;
    if (!sameTensors(last, argument) || !sameLengths(last.outputs, last.outLengths)) return undefined;
    const given = options as Record<string, unknown>;
    const { keys, values } = last;
    let i = 0;
    // for-in allocates nothing; an option added, removed or changed is a different call.
    for (const key in given) {
      if (keys[i] !== key || !sameValue(values[i], given[key])) return undefined;
      i++;
    }
    return i === keys.length ? last : undefined;
  }

  /**
   * Remembers a call that may repeat (its preparation, or every member's, set `again`; the tensor
   * is a typed array, or the group's are), replacing its name's last one.
   */
  remember(op: unknown, argument: unknown, options: unknown, prepared: P): void {
    const calls: readonly Prepared[] = Array.isArray(prepared) ? prepared : [prepared as Prepared];
    const tensors: readonly unknown[] = ArrayBuffer.isView(argument) ? [argument] : Array.isArray(argument) ? argument : [];
    if (tensors.length === 0 || tensors.length !== calls.length) return;
    if (!tensors.every((t) => ArrayBuffer.isView(t)) || !calls.every((c) => c.again !== undefined && c.buffer !== undefined))
      return;
    if (typeof options !== 'object' || options === null || Object.getPrototypeOf(options) !== Object.prototype) return;
    const given = options as Record<string, unknown>;
    if (typeof given.name !== 'string') return;
    if (this.byName.size >= kMaxRemembered && !this.byName.has(given.name)) this.byName.clear();
    const keys: string[] = [];
    const values: unknown[] = [];
    for (const key in given) {
      keys.push(key);
      const value = given[key];
      values.push(Array.isArray(value) ? [...value] : value);
    }
    const typed = [...tensors] as TypedArray[];
    const outputs = calls.map((c) => c.buffer as TypedArray);
    this.byName.set(given.name, {
      op,
      tensors: typed,
      lengths: typed.map((t) => t.length),
      keys,
      values,
      outputs,
      outLengths: outputs.map((o) => o.length),
      prepared,
      set: calls[0]?.set,
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

/** Whether `argument` is the remembered tensor (or the group's tensors, in order), each of its length then. */
function sameTensors(last: Remembered<Prepared | readonly Prepared[]>, argument: unknown): boolean {
  const { tensors, lengths } = last;
  if (ArrayBuffer.isView(argument))
    return tensors.length === 1 && tensors[0] === argument && (argument as TypedArray).length === lengths[0];
  if (!Array.isArray(argument) || argument.length !== tensors.length) return false;
  for (let i = 0; i < tensors.length; i++) {
    const tensor = tensors[i] as TypedArray;
    if (argument[i] !== tensor || tensor.length !== lengths[i]) return false;
  }
  return true;
}

function sameLengths(arrays: readonly TypedArray[], lengths: readonly number[]): boolean {
  for (let i = 0; i < arrays.length; i++) if ((arrays[i] as TypedArray).length !== lengths[i]) return false;
  return true;
}

/** An option's value as remembered (arrays as copies, compared element by element) against the one given. */
function sameValue(remembered: unknown, given: unknown): boolean {
  if (remembered === given) return !Array.isArray(given);
  if (!Array.isArray(remembered) || !Array.isArray(given) || remembered.length !== given.length) return false;
  for (let i = 0; i < given.length; i++) if (remembered[i] !== given[i]) return false;
  return true;
}
