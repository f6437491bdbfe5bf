/**
 * Collectives on tf.Tensor: each reads the tensor's values, runs the ringreduce collective on
 * them and returns a new tensor (the input is left as it was; the caller disposes both).
 * The `*Sync` forms block the calling thread until every rank has contributed; use them where
 * tfjs calls you synchronously (an optimizer step inside model.fit), the async forms elsewhere.
 */
import type * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError, type ReduceOp, type ShapedTensor } from '../../index.js';
import { collectivesOf, type RuntimeOption } from './runtime.js';
import { checkTensor, read, readSync, toTensor, type WireArray, wireOp } from './tensor_codec.js';

export interface TensorCollectiveOptions extends RuntimeOption {
  /** Identifies the collective across ranks; the same on every rank. */
  name?: string;
}

export interface TensorAllreduceOptions extends TensorCollectiveOptions {
  /** Default 'average' (bool tensors: 'max' or 'min', see tensor_codec.ts). */
  op?: ReduceOp;
}

export interface TensorBroadcastOptions extends TensorCollectiveOptions {
  /** The rank whose value every rank receives (default 0). */
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
  const t = checkGatherable(tensor);
  const out = await collectivesOf(options).allgather(shaped(await read(t), t.shape), collectiveOptions(options, {}));
  return gathered(out, t);
}

/** allgather, blocking the calling thread. */
export function allgatherSync(tensor: tf.Tensor, options: TensorCollectiveOptions = {}): tf.Tensor {
  const t = checkGatherable(tensor);
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

function shaped(data: WireArray, shape: readonly number[]): ShapedTensor<WireArray> {
  return { data, shape };
}

function dataOf(out: WireArray | ShapedTensor<WireArray>): WireArray {
  return ArrayBuffer.isView(out) ? out : out.data;
}

/** Core options without the adapter's own (`runtime`), and without undefined entries. */
function collectiveOptions<T extends object>(options: TensorCollectiveOptions, extra: T): T & { name?: string } {
  return options.name === undefined ? extra : { ...extra, name: options.name };
}

function checkGatherable(tensor: tf.Tensor): tf.Tensor {
  const t = checkTensor(tensor);
  if (t.rank === 0)
    throw new InvalidArgumentError('tensor must have at least one dimension to be gathered (reshape a scalar to [1])');
  return t;
}

function gathered(out: WireArray | ShapedTensor<WireArray>, input: tf.Tensor): tf.Tensor {
  const data = dataOf(out);
  const rest = input.shape.slice(1);
  const rowSize = rest.reduce((a, b) => a * b, 1);
  const rows = ArrayBuffer.isView(out) ? (rowSize === 0 ? 0 : data.length / rowSize) : (out.shape[0] ?? 0);
  return toTensor(data, [rows, ...rest], input.dtype);
}
