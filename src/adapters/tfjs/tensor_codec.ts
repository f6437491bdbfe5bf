/**
 * tf.Tensor <-> the typed arrays ringreduce moves. float32 travels as Float32Array, int32 as
 * Int32Array, bool as Uint8Array of 0/1 (tfjs' own storage for bool). Reductions of bool are
 * logical: max/sum are OR, min/product are AND; an average of booleans has no meaning.
 */
import * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError, type ReduceOp } from '../../index.js';

export type WireArray = Float32Array | Int32Array | Uint8Array;

const kSupported = ['float32', 'int32', 'bool'] as const;
type SupportedDType = (typeof kSupported)[number];

export function checkTensor(tensor: unknown, argument = 'tensor'): tf.Tensor {
  if (!(tensor instanceof tf.Tensor)) throw new InvalidArgumentError(`${argument} must be a tf.Tensor`);
  if (tensor.isDisposed) throw new InvalidArgumentError(`${argument} is disposed`);
  if (!(kSupported as readonly string[]).includes(tensor.dtype)) {
    throw new InvalidArgumentError(`${argument} has dtype ${tensor.dtype}; supported: ${kSupported.join(', ')}`);
  }
  return tensor;
}

/** The tensor's values as the typed array ringreduce moves (synchronous read). */
export function readSync(tensor: tf.Tensor): WireArray {
  return asWire(tensor.dtype as SupportedDType, tensor.dataSync());
}

/** The tensor's values as the typed array ringreduce moves. */
export async function read(tensor: tf.Tensor): Promise<WireArray> {
  return asWire(tensor.dtype as SupportedDType, await tensor.data());
}

function asWire(dtype: SupportedDType, values: tf.TypedArray | string[]): WireArray {
  if (dtype === 'float32' && values instanceof Float32Array) return values;
  if (dtype === 'int32' && values instanceof Int32Array) return values;
  if (dtype === 'bool' && values instanceof Uint8Array) return values;
  // A backend may hand back another array type (e.g. a plain array): convert once.
  if (dtype === 'float32') return Float32Array.from(values as ArrayLike<number>);
  if (dtype === 'int32') return Int32Array.from(values as ArrayLike<number>);
  return Uint8Array.from(values as ArrayLike<number>, (v) => (v ? 1 : 0));
}

/** A tensor of `dtype` and `shape` holding `values` (which tfjs keeps or copies, not ringreduce). */
export function toTensor(values: WireArray, shape: readonly number[], dtype: tf.DataType): tf.Tensor {
  return tf.tensor(values, [...shape], dtype);
}

/** The reduction to run on the wire for `dtype`; bool maps to logical max/min. */
export function wireOp(dtype: tf.DataType, op: ReduceOp): ReduceOp {
  if (dtype !== 'bool') return op;
  if (op === 'max' || op === 'sum') return 'max';
  if (op === 'min' || op === 'product') return 'min';
  throw new InvalidArgumentError(`op '${op}' is not defined for bool tensors; use 'max' (or) or 'min' (and)`);
}
