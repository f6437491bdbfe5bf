/**
 * Serial reference results for the conformance suite, computed independently of the library's
 * kernels: integers in BigInt, wrapped to the dtype's width at the end (C semantics); floats in
 * double precision.
 */

import { constructorOf, isBigInt, isFloat } from '../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../src/core/types.js';

const kBits: Partial<Record<DType, number>> = {
  int8: 8,
  int16: 16,
  int32: 32,
  int64: 64,
  uint8: 8,
  uint16: 16,
  uint32: 32,
  uint64: 64,
};
const kSigned = new Set<DType>(['int8', 'int16', 'int32', 'int64']);

/** Deterministic input of `rank`: varied signs and magnitudes, int64 beyond 2^53. */
export function makeInput(dtype: DType, rank: number, count: number, op: ReduceOp): TypedArray {
  const out = new (constructorOf(dtype))(count);
  for (let i = 0; i < count; i++) {
    const k = (i * 7 + rank * 13) % 23;
    if (isFloat(dtype)) {
      // Products stay near 1 so they neither overflow nor underflow.
      (out as Float64Array)[i] = op === 'product' ? 1 + (k - 11) / 64 : (k - 11) * 0.75 + rank / 8;
    } else if (isBigInt(dtype)) {
      const big = (BigInt(k) << 58n) + BigInt(rank * 1_000_003 + i);
      (out as BigInt64Array)[i] = dtype === 'int64' ? BigInt.asIntN(64, kSigned.has(dtype) && k % 2 ? -big : big) : big;
    } else {
      (out as Int32Array)[i] = (k - 11) * 9 + rank;
    }
  }
  return out;
}

function combine(op: ReduceOp, a: bigint, b: bigint): bigint {
  if (op === 'min') return a < b ? a : b;
  if (op === 'max') return a > b ? a : b;
  if (op === 'product') return a * b;
  return a + b;
}

/** Wraps an integer held exactly in a double to the dtype's width, as a C cast would. */
function wrapSmall(dtype: DType, x: number): number {
  const bits = kBits[dtype] as number;
  const mod = 2 ** bits;
  let v = ((x % mod) + mod) % mod;
  if (kSigned.has(dtype) && v >= mod / 2) v -= mod;
  return v;
}

/** An exact product modulo 2^32 of two 32-bit integers (a double would lose the low bits). */
function mulSmall(dtype: DType, a: number, b: number): number {
  return wrapSmall(dtype, Math.imul(a, b) >>> 0);
}

export function expectedAllreduce(dtype: DType, op: ReduceOp, inputs: readonly TypedArray[]): TypedArray {
  const count = inputs[0]?.length ?? 0;
  const out = new (constructorOf(dtype))(count);
  const big = isBigInt(dtype);
  const float = isFloat(dtype);
  for (let i = 0; i < count; i++) {
    if (big) {
      let acc = inputs[0]?.[i] as bigint;
      for (let r = 1; r < inputs.length; r++) acc = combine(op, acc, inputs[r]?.[i] as bigint);
      (out as BigInt64Array)[i] = dtype === 'int64' ? BigInt.asIntN(64, acc) : BigInt.asUintN(64, acc);
      continue;
    }
    let acc = inputs[0]?.[i] as number;
    for (let r = 1; r < inputs.length; r++) {
      const v = inputs[r]?.[i] as number;
      if (op === 'min') acc = Math.min(acc, v);
      else if (op === 'max') acc = Math.max(acc, v);
      else if (op === 'product') acc = float ? acc * v : mulSmall(dtype, acc, v);
      else acc = float ? acc + v : wrapSmall(dtype, acc + v);
    }
    (out as Float64Array)[i] = op === 'average' ? acc / inputs.length : acc;
  }
  return out;
}

/** Exact equality for integers; relative tolerance for floats. Returns a message on the first difference. */
export function compareArrays(dtype: DType, actual: TypedArray, expected: TypedArray): string | undefined {
  if (actual.constructor !== expected.constructor) return `class ${actual.constructor.name} != ${expected.constructor.name}`;
  if (actual.length !== expected.length) return `length ${actual.length} != ${expected.length}`;
  const tolerance = dtype === 'float32' ? 1e-5 : 1e-12;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i] as number | bigint;
    const e = expected[i] as number | bigint;
    if (isFloat(dtype)) {
      const an = a as number;
      const en = e as number;
      if (Math.abs(an - en) > tolerance * Math.max(1, Math.abs(en))) return `[${i}] ${an} != ${en}`;
    } else if (a !== e) {
      return `[${i}] ${a} != ${e}`;
    }
  }
  return undefined;
}
