/**
 * The steady state's hand-off between the caller's thread and the engine's, in shared memory
 * instead of messages: a training loop calls the same named collectives on the same buffers
 * every step, so after the first call of a name the engine already holds its submission, and
 * every later call is two numbers in a ring.
 *
 * How it works. The caller binds a submission to a slot (its first call travels as a message,
 * with the slot: engine_client.ts); the engine keeps it under that slot until the caller
 * replaces or drops it. One SharedArrayBuffer holds two rings of int32, each with one producer
 * and one consumer:
 *
 * - submissions (caller → engine): per call, its slot (negated, -1 - slot, for a ...Sync call)
 *   and its call id. A bound group's slot stands for its members' (bindings.ts): the engine runs
 *   them under the ids below the call's and settles them as one (group_calls.ts). The caller writes the entries of a burst and tells the engine with a
 *   message of a few bytes ({ type: 'ring' }) at the burst's first call and at its end, as it
 *   posts submissions (burst_gate.ts); the engine drains the ring on it, and before it handles
 *   any submission message, so calls reach it in the caller's order.
 * - completions (engine → caller): the ids of ring calls that completed with nothing to hand back
 *   (no output, shape or counts: a reduction into the caller's memory). The engine then posts its
 *   turn's batch of messages as always, empty if every completion went to the ring, and bumps
 *   the completion counter of worker_protocol.ts; the caller drains this ring before it handles
 *   a batch (and while it blocks in a ...Sync call), so completions arrive in the engine's order.
 *   Everything else (failures, results the engine allocated) still travels as a message.
 *
 * Why messages still wake each side, not Atomics.notify with Atomics.waitAsync: a small
 * collective measured slower with waitAsync wake-ups on both sides (docs/performance.md). What
 * the ring saves is the structured clone of each submission (its request and typed arrays) and
 * the engine's new queue entry per call: a step of a hundred named tensors costs half as much.
 *
 * Each ring's head is written only by its producer and its tail only by its consumer, with
 * Atomics.store after the entries (and Atomics.load before them), so a reader never sees an entry
 * before its contents. Heads and tails count calls modulo 2^32 (int32 arithmetic), capacities are
 * powers of two. A full ring is not waited on: the producer sends the call as a message.
 */

/** Int32 words: the two rings' heads and tails, then the entries. */
const kSubmissionHead = 0;
const kSubmissionTail = 1;
const kCompletionHead = 2;
const kCompletionTail = 3;
const kHeaderWords = 4;
/** Calls in flight through the ring at most (each 2 words; a power of two); more go as messages. */
export const kSubmissionCapacity = 4096;
/** Completions not yet taken by the caller at most (a power of two); more go as messages. */
export const kCompletionCapacity = 4096;
const kCompletionsAt = kHeaderWords + 2 * kSubmissionCapacity;
const kWords = kCompletionsAt + kCompletionCapacity;

/** The shared memory of both rings, made by the caller's thread and handed to the engine with its init data. */
export function createHandOff(): SharedArrayBuffer {
  return new SharedArrayBuffer(kWords * 4);
}

/** The caller's side: writes submissions, takes completions. */
export class CallerRings {
  private readonly words: Int32Array;
  /** The submission head as this side last wrote it (only this side writes it). */
  private head = 0;
  private completionTail = 0;

  constructor(buffer: SharedArrayBuffer) {
    this.words = new Int32Array(buffer);
  }

  /** Writes one call of bound submission `slot`; false when the ring is full (send it as a message). */
  submit(slot: number, id: number, sync: boolean): boolean {
    const words = this.words;
    if (((this.head - Atomics.load(words, kSubmissionTail)) | 0) >= kSubmissionCapacity) return false;
    const at = kHeaderWords + 2 * (this.head & (kSubmissionCapacity - 1));
    words[at] = sync ? -1 - slot : slot;
    words[at + 1] = id;
    this.head = (this.head + 1) | 0;
    Atomics.store(words, kSubmissionHead, this.head);
    return true;
  }

  /** Calls `done` with the id of every completion in the ring, oldest first. */
  takeCompletions(done: (id: number) => void): void {
    const words = this.words;
    const head = Atomics.load(words, kCompletionHead);
    while (this.completionTail !== head) {
      const id = words[kCompletionsAt + (this.completionTail & (kCompletionCapacity - 1))] as number;
      this.completionTail = (this.completionTail + 1) | 0;
      Atomics.store(words, kCompletionTail, this.completionTail);
      done(id);
    }
  }
}

/** One call of a bound submission, as the engine reads it from the ring. */
export interface RingCall {
  slot: number;
  id: number;
  sync: boolean;
}

/** The engine's side: takes submissions, writes completions. */
export class EngineRings {
  private readonly words: Int32Array;
  private tail = 0;
  private completionHead = 0;
  /** Reused for every entry read: the reader handles it before the next. */
  private readonly call: RingCall = { slot: 0, id: 0, sync: false };

  constructor(buffer: SharedArrayBuffer) {
    this.words = new Int32Array(buffer);
  }

  /**
   * Hands `take` the calls in the ring, oldest first, until it is empty or `take` returns false
   * (the call's slot is not bound yet: its message is still on the way); that call stays first,
   * and false is returned.
   */
  takeSubmissions(take: (call: RingCall) => boolean): boolean {
    const words = this.words;
    const head = Atomics.load(words, kSubmissionHead);
    while (this.tail !== head) {
      const at = kHeaderWords + 2 * (this.tail & (kSubmissionCapacity - 1));
      const slot = words[at] as number;
      this.call.sync = slot < 0;
      this.call.slot = slot < 0 ? -1 - slot : slot;
      this.call.id = words[at + 1] as number;
      if (!take(this.call)) return false;
      this.tail = (this.tail + 1) | 0;
      Atomics.store(words, kSubmissionTail, this.tail);
    }
    return true;
  }

  /** Writes a completion of ring call `id`; false when the ring is full (post it as a message). */
  complete(id: number): boolean {
    const words = this.words;
    if (((this.completionHead - Atomics.load(words, kCompletionTail)) | 0) >= kCompletionCapacity) return false;
    words[kCompletionsAt + (this.completionHead & (kCompletionCapacity - 1))] = id;
    this.completionHead = (this.completionHead + 1) | 0;
    Atomics.store(words, kCompletionHead, this.completionHead);
    return true;
  }
}
