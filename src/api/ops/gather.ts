/** gather on the caller's side: options, the input copy, and the root's result. */
import type { TypedArray } from '../../core/types.js';
import type { GatherRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, firstDimension, parseGatherOut, parseName, parseRoot, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.gather} and {@link RingReduce.gatherSync}; the module's functions take the same. */
export interface GatherOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /** The rank that gets every rank's tensor. Default 0. */
  root?: number;
  /** The root's only: where the result goes (as allgather's 'out': exactly the gathered length). */
  out?: TypedArray;
}

export function prepareGather(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'root', 'out', 'processSet', 'timeoutMs']);
  const t = parseTensor(tensor);
  firstDimension(t, 'gather');
  const root = parseRoot(o.root, ctx.size);
  const out = ctx.rank === root ? parseGatherOut(o.out, t) : undefined;
  const request: GatherRequest = {
    name: ctx.nameFor('gather', parseName(o.name)),
    op: 'gather',
    dtype: t.dtype,
    shape: t.shape,
    root,
  };
  if (out) request.outLength = out.length;
  const { buffer, staging } = copyToStaging(ctx, t);
  const prepared: Prepared = {
    request,
    buffer,
    staging,
    finish: (completion) =>
      ctx.rank === root ? resultLike(t, completion.output ?? (out as TypedArray), completion.shape ?? t.shape) : null,
  };
  if (out) prepared.output = out;
  return prepared;
}
