/** barrier on the caller's side: no data, only a name. */
import type { BarrierRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions, parseName } from '../tensor_args.js';

/** Options of {@link RingReduce.barrier} and {@link RingReduce.barrierSync}. */
export interface BarrierOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  name?: string;
}

export function prepareBarrier(ctx: CallContext, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'processSet']);
  const request: BarrierRequest = { name: ctx.nameFor('barrier', parseName(o.name)), op: 'barrier', dtype: 'uint8', shape: [0] };
  return { request, buffer: undefined, finish: () => undefined };
}
