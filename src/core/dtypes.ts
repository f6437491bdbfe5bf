/** The mapping between typed array classes and dtypes, and the element sizes behind it. */
import { InvalidArgumentError } from './errors.js';
import { Float16Bits } from './float16.js';
import type { DType, ReduceOp, TypedArray, WireDType } from './types.js';

export type TypedArrayConstructor = {
  new (length: number): TypedArray;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
  readonly name: string;
};

const kConstructors: Record<WireDType, TypedArrayConstructor> = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  int64: BigInt64Array as unknown as TypedArrayConstructor,
  uint64: BigUint64Array as unknown as TypedArrayConstructor,
  float16: Float16Bits,
};

/** The dtypes a caller's tensor may have. */
export const kDTypes: readonly DType[] = [
  'float32',
  'float64',
  'int8',
  'int16',
  'int32',
  'uint8',
  'uint16',
  'uint32',
  'int64',
  'uint64',
];

/** Wire codes of the dtypes (stable, append only: they travel in negotiation messages). */
export const kWireDTypes: readonly WireDType[] = [...kDTypes, 'float16'];

/** The dtype of a typed array, or undefined when it is not one ringreduce accepts. */
export function dtypeOf(value: unknown): WireDType | undefined {
  if (value instanceof Float32Array) return 'float32';
  // Before Uint16Array: Float16Bits is one.
  if (value instanceof Float16Bits) return 'float16';
  if (value instanceof Float64Array) return 'float64';
  if (value instanceof Int32Array) return 'int32';
  if (value instanceof BigInt64Array) return 'int64';
  if (value instanceof Uint8Array && !(value instanceof Uint8ClampedArray)) return 'uint8';
  if (value instanceof Int8Array) return 'int8';
  if (value instanceof Int16Array) return 'int16';
  if (value instanceof Uint16Array) return 'uint16';
  if (value instanceof Uint32Array) return 'uint32';
  if (value instanceof BigUint64Array) return 'uint64';
  return undefined;
}

/** A caller's dtype: what dtypeOf says, except the engine's own 'float16'. */
export function callerDTypeOf(value: unknown): DType | undefined {
  const dtype = dtypeOf(value);
  return dtype === 'float16' ? undefined : dtype;
}

/**
 * `array` as the class of `dtype`: a posted Float16Bits arrives as a plain Uint16Array (the
 * structured clone knows only the built-in classes), and the kernels pick by class.
 */
export function asDType<A extends TypedArray | undefined>(dtype: WireDType, array: A): A {
  if (array === undefined || dtype !== 'float16' || array instanceof Float16Bits) return array;
  return viewOf(dtype, array.buffer, array.byteOffset, array.length) as A;
}

export function constructorOf(dtype: WireDType): TypedArrayConstructor {
  return kConstructors[dtype];
}

export function bytesPerElement(dtype: WireDType): number {
  return kConstructors[dtype].BYTES_PER_ELEMENT;
}

export function isFloat(dtype: WireDType): boolean {
  return dtype === 'float32' || dtype === 'float64' || dtype === 'float16';
}

export function isBigInt(dtype: WireDType): boolean {
  return dtype === 'int64' || dtype === 'uint64';
}

/** A typed array of `dtype` viewing `length` elements of `buffer` from `byteOffset`. */
export function viewOf(dtype: WireDType, buffer: ArrayBufferLike, byteOffset = 0, length?: number): TypedArray {
  const Ctor = kConstructors[dtype];
  return length === undefined ? new Ctor(buffer, byteOffset) : new Ctor(buffer, byteOffset, length);
}

/** A zero-filled typed array of `dtype` backed by a SharedArrayBuffer (shared with the engine worker). */
export function allocShared(dtype: WireDType, length: number): TypedArray {
  const Ctor = kConstructors[dtype];
  return new Ctor(new SharedArrayBuffer(length * Ctor.BYTES_PER_ELEMENT), 0, length);
}

export type BitwiseOp = 'band' | 'bor' | 'bxor';

/** Whether `op` is a bitwise reduction (integers only). */
export function isBitwise(op: ReduceOp): op is BitwiseOp {
  return op === 'band' || op === 'bor' || op === 'bxor';
}

/** Whether `op` is defined on `dtype`: 'average' on floats only (an integer one would truncate), bitwise ops on integers only. */
export function reduceOpFits(dtype: WireDType, op: ReduceOp): boolean {
  return isFloat(dtype) ? !isBitwise(op) : op !== 'average';
}

/** Throws an InvalidArgumentError naming the op and the dtype unless `reduceOpFits(dtype, op)`. */
export function checkReduceOp(dtype: WireDType, op: ReduceOp): void {
  if (reduceOpFits(dtype, op)) return;
  const needs = isFloat(dtype) ? 'an integer' : 'a float';
  throw new InvalidArgumentError(`op '${op}' needs ${needs} dtype, got ${dtype}`);
}

/**
 * The identity of `op` on `dtype`: what a rank that has joined (it has no more data) contributes,
 * so that the reduction is the one over the other ranks. 'average' is a sum here (the divisor is
 * the number of ranks that contributed). For 'float16' it is the value's bits, as the array stores them.
 */
export function reduceIdentity(op: ReduceOp, dtype: WireDType): number | bigint {
  const big = isBigInt(dtype);
  switch (op) {
    case 'sum':
    case 'average':
    case 'bor':
    case 'bxor':
      return big ? 0n : 0;
    case 'product':
      // float16 holds bits: 0x3c00 is 1.0.
      return big ? 1n : dtype === 'float16' ? 0x3c00 : 1;
    case 'band':
      // All bits set: -1 stores as the largest value of an unsigned type.
      return big ? -1n : -1;
    case 'min':
      return extreme(dtype, 'largest');
    case 'max':
      return extreme(dtype, 'smallest');
  }
}

function extreme(dtype: WireDType, which: 'largest' | 'smallest'): number | bigint {
  const largest = which === 'largest';
  switch (dtype) {
    case 'float16':
      // The bits of +Infinity and -Infinity.
      return largest ? 0x7c00 : 0xfc00;
    case 'float32':
    case 'float64':
      return largest ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
    case 'int64':
      return largest ? 2n ** 63n - 1n : -(2n ** 63n);
    case 'uint64':
      return largest ? 2n ** 64n - 1n : 0n;
    default: {
      const bits = bytesPerElement(dtype) * 8;
      const signed = dtype.startsWith('int');
      if (signed) return largest ? 2 ** (bits - 1) - 1 : -(2 ** (bits - 1));
      return largest ? 2 ** bits - 1 : 0;
    }
  }
}
