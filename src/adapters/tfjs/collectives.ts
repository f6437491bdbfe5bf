/**
 * Collectives on tf.Tensor: each reads the tensor's values, runs the ringreduce collective on
 * them and returns new tensors (the input is left as it was; the caller disposes both). The
 * result's shape is the one the core collective reports, its dtype the input's.
 * The `*Sync` forms block the calling thread until every rank has contributed; use them where
 * tfjs calls you synchronously (an optimizer step inside model.fit), the async forms elsewhere.
 */
import type * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError, type ReduceOp, type ShapedTensor, type Splits } from '../../index.js';
import { collectivesOf, type ProcessSetOption, type RuntimeOption } from './runtime.js';
import { checkTensor, read, readSync, toTensor, type WireArray, wireOp } from './tensor_codec.js';

/** The options every tensor collective of the adapter takes: runtime, process set, name and deadline. */
export interface TensorCollectiveOptions extends RuntimeOption, ProcessSetOption {
  /** Identifies the collective across ranks; the same on every rank. */
  name?: string;
  /** Fails the call with a TimeoutError naming the ranks that did not submit it after this many ms (the core's `timeoutMs`). */
  timeoutMs?: number;
}

/** Options of the adapter's {@link allreduce} and {@link allreduceSync}. */
export interface TensorAllreduceOptions extends TensorCollectiveOptions {
  /** Default 'average' (bool tensors: 'max' or 'min', see tensor_codec.ts). */
  op?: ReduceOp;
}

/** Options of the adapter's {@link broadcast} and {@link broadcastSync}. */
export interface TensorBroadcastOptions extends TensorCollectiveOptions {
  /** The rank whose value every rank receives (default 0). */
  root?: number;
}

/** Options of the adapter's {@link reducescatter} and {@link reducescatterSync}. */
export interface TensorReducescatterOptions extends TensorAllreduceOptions {
  /** Multiplies the input before the reduction (float32 tensors only). Default 1. */
  prescale?: number;
  /** Multiplies this rank's part of the result (float32 tensors only). Default 1. */
  postscale?: number;
  /**
   * Rows (first dimension) of the result on each rank, in rank order, adding up to the first
   * dimension, as an array or an integer typed array; the same on every rank. Default: as even
   * as possible, the first ranks taking one more.
   */
  splits?: Splits;
}

/** Options of the adapter's {@link alltoall} and {@link alltoallSync}. */
export interface TensorAlltoallOptions extends TensorCollectiveOptions {
  /**
   * Rows (first dimension) of the tensor for each rank, in rank order, adding up to the first
   * dimension, as an array or an integer typed array (`await t.data()` of an int32 tensor).
   * Default: an even split, which needs the first dimension to be a multiple of size.
   */
  splits?: Splits;
}

/** What the adapter's {@link alltoall} and {@link alltoallSync} give back. */
export interface TensorAlltoallResult {
  /** The rows received, rank 0's first: shape [Σ receivedSplits, ...the input's other dimensions]. */
  output: tf.Tensor;
  /** How many rows came from each rank, in rank order. */
  receivedSplits: number[];
}

/** Options of the adapter's {@link gather} and {@link gatherSync}. */
export interface TensorGatherOptions extends TensorCollectiveOptions {
  /** The rank that receives every rank's tensor (default 0). */
  root?: number;
}

/**
 * Reduces `tensor` element-wise across ranks.
 *
 * @example
 * const grad = tf.tensor([rr.rank(), 1]);
 * const mean = await allreduce(grad); // [ (size-1)/2, 1 ] on every rank
 */
export async function allreduce(tensor: tf.Tensor, options: TensorAllreduceOptions = {}): Promise<tf.Tensor> {
  const t = checkTensor(tensor);
  const op = wireOp(t.dtype, options.op ?? 'average');
  const out = await collectivesOf(options).allreduce(shaped(await read(t), t.shape), collectiveOptions(options, { op }));
  return toTensor(dataOf(out), t.shape, t.dtype);
}

/** allreduce, blocking the calling thread. */
export function allreduceSync(tensor: tf.Tensor, options: TensorAllreduceOptions = {}): tf.Tensor {
  const t = checkTensor(tensor);
  const op = wireOp(t.dtype, options.op ?? 'average');
  const out = collectivesOf(options).allreduceSync(shaped(readSync(t), t.shape), collectiveOptions(options, { op }));
  return toTensor(dataOf(out), t.shape, t.dtype);
}

/**
 * Concatenates every rank's `tensor` along the first dimension, in rank order. The first
 * dimension may differ between ranks; the others may not.
 *
 * @example
 * const rows = tf.ones([rr.rank() + 1, 2]);
 * const all = await allgather(rows); // shape [size·(size+1)/2, 2]
 */
export async function allgather(tensor: tf.Tensor, options: TensorCollectiveOptions = {}): Promise<tf.Tensor> {
  const t = checkRows(tensor, 'allgather');
  const out = await collectivesOf(options).allgather(shaped(await read(t), t.shape), collectiveOptions(options, {}));
  return gathered(out, t);
}

/** allgather, blocking the calling thread. */
export function allgatherSync(tensor: tf.Tensor, options: TensorCollectiveOptions = {}): tf.Tensor {
  const t = checkRows(tensor, 'allgather');
  const out = collectivesOf(options).allgatherSync(shaped(readSync(t), t.shape), collectiveOptions(options, {}));
  return gathered(out, t);
}

/**
 * Every rank receives the root's `tensor` (same shape and dtype on every rank).
 *
 * @example
 * const seed = await broadcast(tf.scalar(Date.now() % 1000, 'int32'), { root: 0 });
 */
export async function broadcast(tensor: tf.Tensor, options: TensorBroadcastOptions = {}): Promise<tf.Tensor> {
  const t = checkTensor(tensor);
  const out = await collectivesOf(options).broadcast(
    shaped(await read(t), t.shape),
    collectiveOptions(options, { root: options.root ?? 0 }),
  );
  return toTensor(dataOf(out), t.shape, t.dtype);
}

/** broadcast, blocking the calling thread. */
export function broadcastSync(tensor: tf.Tensor, options: TensorBroadcastOptions = {}): tf.Tensor {
  const t = checkTensor(tensor);
  const out = collectivesOf(options).broadcastSync(
    shaped(readSync(t), t.shape),
    collectiveOptions(options, { root: options.root ?? 0 }),
  );
  return toTensor(dataOf(out), t.shape, t.dtype);
}

/**
 * Reduces `tensor` element-wise across ranks (like allreduce) and gives each rank one slice of
 * the result along the first dimension: rank r gets rows [start_r, start_r + count_r), the
 * counts as even as possible (the first `rows % size` ranks get one row more). Every rank
 * passes the same shape.
 *
 * @example
 * const grads = tf.fill([4, 2], rr.rank());
 * const mine = await reducescatter(grads); // on 2 ranks: shape [2, 2], every value 0.5
 */
export async function reducescatter(tensor: tf.Tensor, options: TensorReducescatterOptions = {}): Promise<tf.Tensor> {
  const t = checkRows(tensor, 'reducescatter');
  const out = await collectivesOf(options).reducescatter(shaped(await read(t), t.shape), reducescatterOptions(options, t));
  return fromShaped(out, t.dtype);
}

/** reducescatter, blocking the calling thread. */
export function reducescatterSync(tensor: tf.Tensor, options: TensorReducescatterOptions = {}): tf.Tensor {
  const t = checkRows(tensor, 'reducescatter');
  const out = collectivesOf(options).reducescatterSync(shaped(readSync(t), t.shape), reducescatterOptions(options, t));
  return fromShaped(out, t.dtype);
}

/**
 * Sends `splits[j]` rows (first dimension) of `tensor` to rank j, and receives, in rank order,
 * the rows every rank sends this one. The dimensions after the first agree on every rank; the
 * splits may differ per rank.
 *
 * @example
 * const rows = tf.fill([rr.size(), 3], rr.rank(), 'int32');
 * const { output, receivedSplits } = await alltoall(rows); // output[j] is all j's; splits all 1
 */
export async function alltoall(tensor: tf.Tensor, options: TensorAlltoallOptions = {}): Promise<TensorAlltoallResult> {
  const t = checkRows(tensor, 'alltoall');
  const result = await collectivesOf(options).alltoall(shaped(await read(t), t.shape), alltoallOptions(options));
  return { output: fromShaped(result.output, t.dtype), receivedSplits: result.receivedSplits };
}

/** alltoall, blocking the calling thread. */
export function alltoallSync(tensor: tf.Tensor, options: TensorAlltoallOptions = {}): TensorAlltoallResult {
  const t = checkRows(tensor, 'alltoall');
  const result = collectivesOf(options).alltoallSync(shaped(readSync(t), t.shape), alltoallOptions(options));
  return { output: fromShaped(result.output, t.dtype), receivedSplits: result.receivedSplits };
}

/**
 * The root receives every rank's `tensor` concatenated along the first dimension, in rank
 * order (the first dimension may differ between ranks, the others may not); the other ranks
 * receive null.
 *
 * @example
 * const preds = tf.ones([rr.rank() + 1, 10]);
 * const all = await gather(preds, { root: 0 }); // rank 0: shape [size·(size+1)/2, 10]; others: null
 */
export async function gather(tensor: tf.Tensor, options: TensorGatherOptions = {}): Promise<tf.Tensor | null> {
  const t = checkRows(tensor, 'gather');
  const out = await collectivesOf(options).gather(
    shaped(await read(t), t.shape),
    collectiveOptions(options, { root: options.root ?? 0 }),
  );
  return out === null ? null : fromShaped(out, t.dtype);
}

/** gather, blocking the calling thread. */
export function gatherSync(tensor: tf.Tensor, options: TensorGatherOptions = {}): tf.Tensor | null {
  const t = checkRows(tensor, 'gather');
  const out = collectivesOf(options).gatherSync(
    shaped(readSync(t), t.shape),
    collectiveOptions(options, { root: options.root ?? 0 }),
  );
  return out === null ? null : fromShaped(out, t.dtype);
}

function shaped(data: WireArray, shape: readonly number[]): ShapedTensor<WireArray> {
  return { data, shape };
}

function dataOf(out: WireArray | ShapedTensor<WireArray>): WireArray {
  return ArrayBuffer.isView(out) ? out : out.data;
}

/** The options every core collective takes. */
type CoreScope = { name?: string; timeoutMs?: number } & ProcessSetOption;

/** Core options without the adapter's own (`runtime`), and without undefined entries. */
function collectiveOptions<T extends object>(options: TensorCollectiveOptions, extra: T): T & CoreScope {
  const out: T & CoreScope = { ...extra };
  if (options.name !== undefined) out.name = options.name;
  if (options.processSet !== undefined) out.processSet = options.processSet;
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  return out;
}

/** A supported tensor with a first dimension, which `op` splits or concatenates along. */
function checkRows(tensor: tf.Tensor, op: string): tf.Tensor {
  const t = checkTensor(tensor);
  if (t.rank === 0) {
    throw new InvalidArgumentError(
      `tensor of ${op} must have at least one dimension (it works along the first; reshape a scalar to [1])`,
    );
  }
  return t;
}

function fromShaped(out: ShapedTensor<WireArray>, dtype: tf.DataType): tf.Tensor {
  return toTensor(out.data, out.shape, dtype);
}

/** reducescatter's core options: allreduce's default op ('average'), the scales only when given. */
function reducescatterOptions(
  options: TensorReducescatterOptions,
  t: tf.Tensor,
): { op: ReduceOp; prescale?: number; postscale?: number; splits?: Splits } & CoreScope {
  const extra: { op: ReduceOp; prescale?: number; postscale?: number; splits?: Splits } = {
    op: wireOp(t.dtype, options.op ?? 'average'),
  };
  if (options.prescale !== undefined) extra.prescale = options.prescale;
  if (options.postscale !== undefined) extra.postscale = options.postscale;
  if (options.splits !== undefined) extra.splits = options.splits;
  return collectiveOptions(options, extra);
}

function alltoallOptions(options: TensorAlltoallOptions): { splits?: Splits } & CoreScope {
  return collectiveOptions(options, options.splits === undefined ? {} : { splits: options.splits });
}

function gathered(out: WireArray | ShapedTensor<WireArray>, input: tf.Tensor): tf.Tensor {
  const data = dataOf(out);
  const rest = input.shape.slice(1);
  const rowSize = rest.reduce((a, b) => a * b, 1);
  const rows = ArrayBuffer.isView(out) ? (rowSize === 0 ? 0 : data.length / rowSize) : (out.shape[0] ?? 0);
  return toTensor(data, [rows, ...rest], input.dtype);
}
