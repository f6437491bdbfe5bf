/** alltoall on the caller's side: options, the input copy, and the rows received. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { Splits, TensorLike, TypedArray } from '../../core/types.js';
import type { AlltoallRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, type Result, resultLike } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, firstDimension, parseGatherOut, parseName, parseSplits, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.alltoall} and {@link RingReduce.alltoallSync}; the module's functions take the same. */
export interface AlltoallOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /**
   * Rows (first dimension) of the tensor for each rank, in rank order, adding up to the first
   * dimension. Default: an even split, which needs the first dimension to be a multiple of size.
   */
  splits?: Splits;
  /**
   * Write the rows received here instead of into fresh memory (SharedArrayBuffer-backed, the
   * tensor's dtype, exactly as long as what this rank receives: the rows every rank sends it
   * times the elements per row). A wrong length fails on every rank with InvalidArgumentError.
   */
  out?: TypedArray;
}

/** What alltoall resolves to. */
export interface AlltoallResult<T extends TensorLike> {
  /** The rows received, rank 0's first; the kind of the tensor passed. */
  output: Result<T>;
  /** How many rows came from each rank. */
  receivedSplits: number[];
}

export function prepareAlltoall(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'splits', 'out', 'processSet', 'timeoutMs']);
  const t = parseTensor(tensor);
  const rows = firstDimension(t, 'alltoall');
  const splits = parseSplits(o.splits, rows, ctx.size, () => {
    if (rows % ctx.size !== 0) {
      throw new InvalidArgumentError(
        `alltoall without option 'splits' splits the first dimension evenly, but ${rows} rows do not divide by ${ctx.size} ranks`,
      );
    }
    return new Array<number>(ctx.size).fill(rows / ctx.size);
  });
  const out = parseGatherOut(o.out, t);
  const request: AlltoallRequest = {
    name: ctx.nameFor('alltoall', parseName(o.name)),
    op: 'alltoall',
    dtype: t.dtype,
    shape: t.shape,
    splits,
  };
  if (out) request.outLength = out.length;
  const { buffer, staging } = copyToStaging(ctx, t);
  const prepared: Prepared = {
    request,
    buffer,
    staging,
    finish: (completion) => ({
      output: resultLike(t, completion.output ?? out ?? buffer, completion.shape ?? t.shape),
      receivedSplits: completion.counts ?? [],
    }),
  };
  if (out) prepared.output = out;
  return prepared;
}
