/**
 * What the facade's collectives share: a call prepared on the caller's thread (its request, the
 * memory the engine works on, and how to turn the engine's completion into the caller's result),
 * and the context each op's preparation needs from its rank (api/ops/).
 */
import type { HalfConverter } from '../algorithms/half_convert.js';
import type { BufferPool } from '../core/buffer_pool.js';
import type { CollectiveOp } from '../core/collective_ops.js';
import type { ShapedTensor, SharedTypedArray, TensorLike, TypedArray } from '../core/types.js';
import type { Call, Completion } from './engine_client.js';
import type { ParsedTensor } from './tensor_args.js';

/**
 * What a collective gives back for a tensor of type `T`: the same class on a SharedArrayBuffer
 * ({@link SharedTypedArray}), as a typed array if `T` is one, as `{ data, shape }` if `T` is. The
 * result's memory is fresh SharedArrayBuffer memory, or the call's option `out` (which must be
 * SharedArrayBuffer-backed), never the input's buffer unless `out` is the input.
 * @example
 * const sum = await rr.allreduce(new Float32Array(4)); // Float32Array<SharedArrayBuffer>
 * const grads = await rr.allgather({ data: new Int32Array(6), shape: [2, 3] }); // ShapedTensor<Int32Array<SharedArrayBuffer>>
 */
export type Result<T extends TensorLike> = T extends TypedArray
  ? SharedTypedArray<T>
  : T extends ShapedTensor<infer D>
    ? ShapedTensor<SharedTypedArray<D>>
    : never;

/** A collective prepared on the caller's thread: the engine call and what the caller gets back. */
export interface Prepared extends Call {
  /** Pooled memory `buffer` views (an input copy), returned to the pool once the call settles. */
  staging?: SharedArrayBuffer;
  /**
   * Pooled memory that `finish` still reads (fp16 compression's wire copy of the result): back to
   * the pool after `finish`, once the engine is done with it (runtime.ts sets `releaseHeld`).
   */
  heldStaging?: SharedArrayBuffer;
  releaseHeld?: () => void;
  finish: (completion: Completion) => unknown;
  /**
   * Set when the very same call may come again (a named call on memory the caller keeps): redoes
   * its per-call work (the input copy) for a repeat, which reuses this preparation (repeats.ts).
   */
  again?: () => void;
}

/** What an op's preparation needs from the rank that makes the call. */
export interface CallContext {
  readonly rank: number;
  readonly size: number;
  /** In a process set: its id and its members (job ranks, in set order), which send and recv translate to. */
  readonly set?: { readonly id: number; readonly ranks: readonly number[] };
  /**
   * The request's name: the caller's, or the next unnamed one of `op` (`label` instead of the op,
   * for calls that are never matched by name: send, recv and batchSendRecv).
   */
  nameFor(op: CollectiveOp | 'send' | 'recv' | 'batchSendRecv', name: string | undefined, label?: string): string;
  /** Fresh shared memory for `length` elements of the tensor's dtype, counted so that it is freed in time. */
  fresh(t: ParsedTensor, length?: number): TypedArray;
  /** Reused shared memory for input copies the engine needs (their layout is known only after negotiation). */
  readonly staging: BufferPool<SharedArrayBuffer>;
  /** fp16 compression's float32 ⇄ fp16 conversions (WebAssembly SIMD where available), made at first use. */
  halves(): HalfConverter;
}

/** The caller's result: `data` with the completion's shape, in the kind the caller passed. */
export function resultLike(t: ParsedTensor, data: TypedArray, shape: readonly number[]): unknown {
  return t.shaped ? { data, shape } : data;
}
