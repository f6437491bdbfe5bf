/** reduce on the caller's side: options, the root's result memory or the others' work space. */
import type { ReduceOp, TypedArray } from '../../core/types.js';
import type { ReduceRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, parseName, parseOut, parseReduceOp, parseRoot, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.reduce} and {@link RingReduce.reduceSync}; the module's functions take the same. */
export interface ReduceOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /** The rank that gets the result. Default 0. */
  root?: number;
  /** As for allreduce. Default 'sum'. */
  op?: ReduceOp;
  /** The root's only: where the result goes (as allreduce's 'out'; may be the tensor itself). */
  out?: TypedArray;
}

export function prepareReduce(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'root', 'op', 'out', 'processSet', 'timeoutMs']);
  const t = parseTensor(tensor);
  const root = parseRoot(o.root, ctx.size);
  const reduceOp = parseReduceOp(o.op, t.dtype);
  const out = parseOut(o.out, t);
  const request: ReduceRequest = {
    name: ctx.nameFor('reduce', parseName(o.name)),
    op: 'reduce',
    dtype: t.dtype,
    shape: t.shape,
    reduceOp,
    root,
  };
  if (ctx.rank !== root) {
    // The tree reduces partial results into this copy; nothing comes back here.
    const { buffer, staging } = copyToStaging(ctx, t);
    return { request, buffer, staging, finish: () => null };
  }
  const buffer = out ?? ctx.fresh(t);
  if (buffer !== t.data) buffer.set(t.data as never);
  const prepared: Prepared = { request, buffer, finish: () => resultLike(t, buffer, t.shape) };
  if (!out) prepared.fresh = true;
  return prepared;
}
