/** broadcast on the caller's side: options, the root's copy, and the result. */
import type { TypedArray } from '../../core/types.js';
import type { BroadcastRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions, parseName, parseOut, parseRoot, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.broadcast} and {@link RingReduce.broadcastSync}; the module's functions take the same. */
export interface BroadcastOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /** The rank whose tensor every rank receives. Default 0. */
  root?: number;
  /** As for allreduce: where the result goes, reused across calls. */
  out?: TypedArray;
}

export function prepareBroadcast(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'root', 'out', 'processSet', 'timeoutMs']);
  const t = parseTensor(tensor);
  const root = parseRoot(o.root, ctx.size);
  const out = parseOut(o.out, t);
  const buffer = out ?? ctx.fresh(t);
  // Only the root's values travel; the others' buffers are overwritten with them.
  if (root === ctx.rank && buffer !== t.data) buffer.set(t.data as never);
  const request: BroadcastRequest = {
    name: ctx.nameFor('broadcast', parseName(o.name)),
    op: 'broadcast',
    dtype: t.dtype,
    shape: t.shape,
    root,
  };
  const prepared: Prepared = { request, buffer, finish: () => resultLike(t, buffer, t.shape) };
  if (!out) prepared.fresh = true;
  return prepared;
}
