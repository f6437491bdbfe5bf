/** scatter on the caller's side: the root's tensor and splits; the other ranks pass nothing. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { ShapedTensor, TypedArray } from '../../core/types.js';
import { splitRows } from '../../engine/ops/reducescatter.js';
import type { ScatterRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, firstDimension, parseName, parseRoot, parseSplits, parseTensor } from '../tensor_args.js';

export interface ScatterOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  name?: string;
  /** The rank whose tensor is split. Default 0. */
  root?: number;
  /** The root's only: rows for each rank, in rank order. Default: as even as possible, the first rows % size ranks one more. */
  splits?: readonly number[];
}

export function prepareScatter(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'root', 'splits', 'processSet']);
  const root = parseRoot(o.root, ctx.size);
  const given = parseName(o.name);
  const finish = (completion: { output?: TypedArray; shape?: number[] }): ShapedTensor => ({
    data: completion.output as TypedArray,
    shape: completion.shape ?? [0],
  });
  if (ctx.rank !== root) {
    if (tensor !== null && tensor !== undefined) {
      throw new InvalidArgumentError(
        `scatter: only the root (rank ${root}) passes a tensor; rank ${ctx.rank} must pass null and receives its rows`,
      );
    }
    if (o.splits !== undefined) throw new InvalidArgumentError(`scatter: option 'splits' is the root's (rank ${root}) only`);
    // Dtype and shape come from the root's request in the agreement; these are placeholders.
    const request: ScatterRequest = {
      name: ctx.nameFor('scatter', given),
      op: 'scatter',
      dtype: 'uint8',
      shape: [0],
      root,
      splits: [],
    };
    return { request, buffer: undefined, finish };
  }
  if (tensor === null || tensor === undefined) {
    throw new InvalidArgumentError(`scatter: the root (rank ${root}) must pass the tensor to split`);
  }
  const t = parseTensor(tensor);
  const rows = firstDimension(t, 'scatter');
  const splits = parseSplits(o.splits, rows, ctx.size, () => splitRows(rows, ctx.size));
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
  return { request, buffer, staging, finish };
}
