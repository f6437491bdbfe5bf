/** reducescatter on the caller's side: options, the input copy, this rank's rows of the result. */
import { elementCount, splitRows } from '../../core/shapes.js';
import type { Compression, ReduceOp, Splits, TypedArray } from '../../core/types.js';
import type { ReducescatterRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import { compressToStaging, decompress, parseCompression, stagedHalves } from '../compression.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import {
  checkOptions,
  firstDimension,
  parseName,
  parseOutOfLength,
  parseReduceOp,
  parseScales,
  parseSplits,
  parseTensor,
} from '../tensor_args.js';

/**
 * Options of {@link RingReduce.reducescatter}, {@link RingReduce.reducescatterSync} and
 * {@link RingReduce.groupedReducescatter}; the module's functions take the same.
 */
export interface ReducescatterOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /** As for allreduce. Default 'sum'. */
  op?: ReduceOp;
  /** Multiplies the input before the reduction (float tensors). Default 1. */
  prescale?: number;
  /** Multiplies this rank's result (float tensors). Default 1. */
  postscale?: number;
  /**
   * Where this rank's rows go (SharedArrayBuffer-backed, the tensor's dtype, exactly their length).
   * In place: `out` is this rank's own rows of the tensor itself (a view of the same shared
   * memory, as NCCL's in-place reduce-scatter); the input copy is skipped and the tensor's other
   * rows are work space, left holding partial sums.
   */
  out?: TypedArray;
  /** As for allreduce: 'fp16' sends a float32 tensor as half precision, reduced in float32. Default 'none'. */
  compression?: Compression;
  /**
   * Rows of the result (first dimension) for each rank, in rank order, adding up to the first
   * dimension; an array or an integer typed array, the same on every rank (torch's reduce_scatter
   * into outputs of uneven sizes). Default: as even as possible, the first dim0 % size ranks one
   * row more.
   */
  splits?: Splits;
}

export function prepareReducescatter(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, [
    'name',
    'op',
    'prescale',
    'postscale',
    'out',
    'processSet',
    'timeoutMs',
    'compression',
    'splits',
  ]);
  const t = parseTensor(tensor);
  const rows = firstDimension(t, 'reducescatter');
  const reduceOp = parseReduceOp(o.op, t.dtype);
  const scales = parseScales(o, t.dtype);
  const rowSize = elementCount(t.shape.slice(1));
  const splits = parseSplits(o.splits, rows, ctx.size, () => splitRows(rows, ctx.size));
  const myRows = splits[ctx.rank] ?? 0;
  const out = parseOutOfLength(o.out, t, myRows * rowSize, `this rank's ${myRows} rows of the result`);
  const compressed = parseCompression(o.compression, t) === 'fp16';
  const request: ReducescatterRequest = {
    name: ctx.nameFor('reducescatter', parseName(o.name)),
    op: 'reducescatter',
    dtype: compressed ? 'float16' : t.dtype,
    shape: t.shape,
    reduceOp,
    ...scales,
  };
  // Only given splits travel: ranks check them against each other (the default is the same everywhere).
  if (o.splits !== undefined) request.splits = splits;
  const shape = [myRows, ...t.shape.slice(1)];
  if (compressed) {
    // The input's halves are work space; this rank's rows come back as halves, decoded by finish.
    const { buffer, staging } = compressToStaging(ctx, t);
    const held = stagedHalves(ctx, myRows * rowSize);
    const finish = () => resultLike(t, decompress(ctx, t, held.buffer, out as Float32Array | undefined), shape);
    return { request, buffer, staging, output: held.buffer, heldStaging: held.staging, finish };
  }
  const output = out ?? ctx.fresh(t, myRows * rowSize);
  const offset = splits.slice(0, ctx.rank).reduce((a, b) => a + b, 0) * rowSize;
  // The reduction works over a copy of the whole input (in place: the tensor); only this rank's rows come back.
  const { buffer, staging } =
    out && isOwnRows(out, t.data, offset) ? { buffer: t.data, staging: undefined } : copyToStaging(ctx, t);
  const prepared: Prepared = { request, buffer, output, finish: () => resultLike(t, output, shape) };
  if (staging) prepared.staging = staging;
  return prepared;
}

/** Whether `out` is exactly the rows at `offset` (elements) of `data`, in the same shared memory. */
function isOwnRows(out: TypedArray, data: TypedArray, offset: number): boolean {
  return (
    data.buffer instanceof SharedArrayBuffer &&
    out.buffer === data.buffer &&
    out.byteOffset === data.byteOffset + offset * data.BYTES_PER_ELEMENT
  );
}
