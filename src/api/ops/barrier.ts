/** barrier on the caller's side: no data, only a name. */
import type { BarrierRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions, parseName } from '../tensor_args.js';

/** Options of {@link RingReduce.barrier} and {@link RingReduce.barrierSync}. */
export interface BarrierOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
}

export function prepareBarrier(ctx: CallContext, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'processSet', 'timeoutMs']);
  const request: BarrierRequest = { name: ctx.nameFor('barrier', parseName(o.name)), op: 'barrier', dtype: 'uint8', shape: [0] };
  return { request, buffer: undefined, finish: () => undefined };
}
