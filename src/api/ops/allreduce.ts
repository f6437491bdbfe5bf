/** allreduce on the caller's side: options, the input copy, and the result. */
import type { ReduceOp, TypedArray } from '../../core/types.js';
import type { AllreduceRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions, parseName, parseOut, parseReduceOp, parseScales, parseTensor } from '../tensor_args.js';

export interface AllreduceOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /** Same name on every rank = same collective. Default: named by call order per op. */
  name?: string;
  /** Default 'sum'. 'average' needs a float dtype; 'band', 'bor', 'bxor' an integer one. */
  op?: ReduceOp;
  /**
   * Write the result here (same dtype and length, SharedArrayBuffer-backed; may be the input)
   * instead of into fresh memory: a loop that reuses it skips the page faults of new memory.
   */
  out?: TypedArray;
  /** Multiplies the input before the reduction (float tensors; Horovod's prescale_factor). Default 1. */
  prescale?: number;
  /** Multiplies the result (float tensors; Horovod's postscale_factor). Default 1. */
  postscale?: number;
}

export function prepareAllreduce(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'op', 'out', 'prescale', 'postscale', 'processSet']);
  const t = parseTensor(tensor);
  const reduceOp = parseReduceOp(o.op, t.dtype);
  const scales = parseScales(o, t.dtype);
  const out = parseOut(o.out, t);
  // Every check is done: only now may the call take an unnamed name (ranks match them by count).
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
  return prepared;
}
