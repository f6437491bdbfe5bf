/** allgather on the caller's side: options, the input copy into pooled memory, and the result. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { TypedArray } from '../../core/types.js';
import type { AllgatherRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, parseGatherOut, parseName, parseTensor } from '../tensor_args.js';

export interface AllgatherOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  name?: string;
  /**
   * Write the result here instead of into fresh memory (SharedArrayBuffer-backed, the tensor's
   * dtype, exactly as long as the gathered result: the sum of every rank's first dimension times
   * the elements per row). A wrong length fails on every rank with InvalidArgumentError.
   */
  out?: TypedArray;
}

export function prepareAllgather(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'out', 'processSet']);
  const t = parseTensor(tensor);
  if (t.shape.length === 0) {
    throw new InvalidArgumentError('tensor of allgather must have at least one dimension (it is concatenated along the first)');
  }
  const out = parseGatherOut(o.out, t);
  // The engine needs the input in shared memory; the output's size is known only after negotiation.
  const { buffer, staging } = copyToStaging(ctx, t);
  const request: AllgatherRequest = {
    name: ctx.nameFor('allgather', parseName(o.name)),
    op: 'allgather',
    dtype: t.dtype,
    shape: t.shape,
  };
  if (out) request.outLength = out.length;
  const prepared: Prepared = {
    request,
    buffer,
    staging,
    finish: (completion) => resultLike(t, completion.output ?? (out as TypedArray), completion.shape ?? t.shape),
  };
  if (out) prepared.output = out;
  return prepared;
}
