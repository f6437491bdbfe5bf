/** allreduce on the caller's side: options, the input copy, and the result. */
import type { AllreduceOp, Compression, TypedArray } from '../../core/types.js';
import type { AllreduceRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import { compressToStaging, decompress, parseCompression } from '../compression.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions, parseAllreduceOp, parseName, parseOut, parseScales, parseTensor } from '../tensor_args.js';

/**
 * Options of {@link RingReduce.allreduce}, {@link RingReduce.allreduceSync} and
 * {@link RingReduce.groupedAllreduce}; the module's functions take the same.
 */
export interface AllreduceOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** Same name on every rank = same collective. Default: named by call order per op. */
  name?: string;
  /**
   * Default 'sum'. 'average' needs a float dtype; 'band', 'bor', 'bxor' an integer one.
   * 'adasum' (Horovod's Adasum: each pair of ranks' vectors a, b combined as
   * (1 - a·b/2|a|²)·a + (1 - a·b/2|b|²)·b, up a binary tree of the ranks) needs a float dtype and
   * a power-of-two number of ranks in the job or process set; fused tensors are combined each on its own.
   */
  op?: AllreduceOp;
  /**
   * Write the result here (same dtype and length, SharedArrayBuffer-backed; may be the input)
   * instead of into fresh memory: a loop that reuses it skips the page faults of new memory.
   */
  out?: TypedArray;
  /** Multiplies the input before the reduction (float tensors; Horovod's prescale_factor). Default 1. */
  prescale?: number;
  /** Multiplies the result (float tensors; Horovod's postscale_factor). Default 1. */
  postscale?: number;
  /**
   * 'fp16' sends a float32 tensor as IEEE half precision (Horovod's Compression.fp16): half the
   * bytes on the wire, reduced in float32 at each step, the result decoded back to float32.
   * Values round to nearest even; beyond ±65504 they become ±Infinity, below 2^-24 they flush
   * to zero. Every rank must pass the same compression. Other dtypes are refused. Default 'none'.
   */
  compression?: Compression;
}

export function prepareAllreduce(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'op', 'out', 'prescale', 'postscale', 'processSet', 'timeoutMs', 'compression']);
  const t = parseTensor(tensor);
  const reduceOp = parseAllreduceOp(o.op, t.dtype, ctx.size);
  const scales = parseScales(o, t.dtype);
  const out = parseOut(o.out, t);
  const compression = parseCompression(o.compression, t);
  // Every check is done: only now may the call take an unnamed name (ranks match them by count).
  if (compression === 'fp16') {
    // The engine reduces the halves in place; finish decodes them before they go back to the pool.
    const { buffer: halves, staging } = compressToStaging(ctx, t);
    const request: AllreduceRequest = {
      name: ctx.nameFor('allreduce', parseName(o.name)),
      op: 'allreduce',
      dtype: 'float16',
      shape: t.shape,
      reduceOp,
      ...scales,
    };
    const finish = () => resultLike(t, decompress(ctx, t, halves, out as Float32Array | undefined), t.shape);
    return { request, buffer: halves, heldStaging: staging, finish };
  }
  // The engine reduces in place: the result's memory starts as a copy of the input.
  const buffer = out ?? ctx.fresh(t);
  if (buffer !== t.data) buffer.set(t.data as never);
  const request: AllreduceRequest = {
    name: ctx.nameFor('allreduce', parseName(o.name)),
    op: 'allreduce',
    dtype: t.dtype,
    shape: t.shape,
    reduceOp,
    ...scales,
  };
  const prepared: Prepared = { request, buffer, finish: () => resultLike(t, buffer, t.shape) };
  if (!out) prepared.fresh = true;
  else if (o.name !== undefined && !t.shaped) {
    const input = t.data;
    prepared.again = buffer === input ? doNothing : () => buffer.set(input as never);
  }
  return prepared;
}

function doNothing(): void {}
