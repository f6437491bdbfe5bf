/** scatter on the caller's side: the root's tensor and splits; the other ranks pass nothing. */
import { InvalidArgumentError } from '../../core/errors.js';
import { splitRows } from '../../core/shapes.js';
import type { ShapedTensor, Splits, TypedArray } from '../../core/types.js';
import type { ScatterRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import {
  checkOptions,
  firstDimension,
  parseGatherOut,
  parseName,
  parseRoot,
  parseSharedOut,
  parseSplits,
  parseTensor,
} from '../tensor_args.js';

/** Options of {@link RingReduce.scatter} and {@link RingReduce.scatterSync}; the module's functions take the same. */
export interface ScatterOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /** The rank whose tensor is split. Default 0. */
  root?: number;
  /** The root's only: rows for each rank, in rank order. Default: as even as possible, the first rows % size ranks one more. */
  splits?: Splits;
  /**
   * Write this rank's rows here instead of into fresh memory (SharedArrayBuffer-backed, the root
   * tensor's dtype, exactly as long as this rank's rows). A wrong dtype or length fails on every
   * rank with InvalidArgumentError.
   */
  out?: TypedArray;
}

export function prepareScatter(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'root', 'splits', 'out', 'processSet', 'timeoutMs']);
  const root = parseRoot(o.root, ctx.size);
  const given = parseName(o.name);
  let out: TypedArray | undefined;
  const finish = (completion: { output?: TypedArray; shape?: number[] }): ShapedTensor => ({
    data: (completion.output ?? out) as TypedArray,
    shape: completion.shape ?? [0],
  });
  if (ctx.rank !== root) {
    if (tensor !== null && tensor !== undefined) {
      throw new InvalidArgumentError(
        `scatter: only the root (rank ${root}) passes a tensor; rank ${ctx.rank} must pass null and receives its rows`,
      );
    }
    if (o.splits !== undefined) throw new InvalidArgumentError(`scatter: option 'splits' is the root's (rank ${root}) only`);
    const shared = parseSharedOut(o.out);
    out = shared?.array;
    // Dtype and shape come from the root's request in the agreement; these are placeholders
    // (the dtype is the out's, for rank 0 to check against the root's).
    const request: ScatterRequest = {
      name: ctx.nameFor('scatter', given),
      op: 'scatter',
      dtype: shared ? shared.dtype : 'uint8',
      shape: [0],
      root,
      splits: [],
    };
    return withOut({ request, buffer: undefined, finish }, out);
  }
  if (tensor === null || tensor === undefined) {
    throw new InvalidArgumentError(`scatter: the root (rank ${root}) must pass the tensor to split`);
  }
  const t = parseTensor(tensor);
  const rows = firstDimension(t, 'scatter');
  const splits = parseSplits(o.splits, rows, ctx.size, () => splitRows(rows, ctx.size));
  out = parseGatherOut(o.out, t);
  // Every check is done: only now may the call take an unnamed name (ranks match them by count).
  const request: ScatterRequest = {
    name: ctx.nameFor('scatter', given),
    op: 'scatter',
    dtype: t.dtype,
    shape: t.shape,
    root,
    splits,
  };
  const { buffer, staging } = copyToStaging(ctx, t);
  return withOut({ request, buffer, staging, finish }, out);
}

/** The call writes into `out` when given; rank 0 checks its length (and dtype) in the agreement. */
function withOut(prepared: Prepared & { request: ScatterRequest }, out: TypedArray | undefined): Prepared {
  if (!out) return prepared;
  prepared.request.outLength = out.length;
  prepared.output = out;
  return prepared;
}
