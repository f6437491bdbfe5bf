/** join on the caller's side: this rank has no more data for the set's collectives. */
import type { JoinRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { checkOptions } from '../tensor_args.js';

/** Options of {@link RingReduce.join}. */
export interface JoinOptions {
  /** Join in this process set. Default: the whole job. */
  processSet?: ProcessSet;
}

export function prepareJoin(ctx: CallContext, options: unknown): Prepared {
  checkOptions(options, ['processSet']);
  const request: JoinRequest = { name: ctx.nameFor('join', undefined), op: 'join', dtype: 'uint8', shape: [0] };
  return { request, buffer: undefined, finish: (completion) => completion.counts?.[0] ?? -1 };
}
