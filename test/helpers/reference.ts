/**
 * Serial reference results for the conformance suite, computed independently of the library's
 * kernels: 64-bit integers in BigInt, narrower ones exactly in doubles (products with
 * Math.imul), each wrapped to the dtype's width at the end (C semantics); floats in double
 * precision.
 */

import { constructorOf, isBigInt, isFloat } from '../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../src/core/types.js';

/** Deterministic input of `rank`: varied signs and magnitudes, int64 beyond 2^53. */
export function makeInput(dtype: DType, rank: number, count: number, op: ReduceOp): TypedArray {
  const out = new (constructorOf(dtype))(count);
  if (isFloat(dtype)) {
    const floats = out as Float64Array;
    for (let i = 0; i < count; i++) {
      const k = (i * 7 + rank * 13) % 23;
      // Products stay near 1 so they neither overflow nor underflow.
      floats[i] = op === 'product' ? 1 + (k - 11) / 64 : (k - 11) * 0.75 + rank / 8;
    }
  } else if (isBigInt(dtype)) {
    const wide = out as BigInt64Array;
    for (let i = 0; i < count; i++) {
      const k = (i * 7 + rank * 13) % 23;
      const big = (BigInt(k) << 58n) + BigInt(rank * 1_000_003 + i);
      wide[i] = dtype === 'int64' ? BigInt.asIntN(64, k % 2 ? -big : big) : big;
    }
  } else {
    // Computed in an Int32Array and stored at once: the same wrap as element by element, faster.
    const ints = new Int32Array(count);
    for (let i = 0; i < count; i++) ints[i] = (((i * 7 + rank * 13) % 23) - 11) * 9 + rank;
    out.set(ints as never);
  }
  return out;
}

function combine(op: ReduceOp, a: bigint, b: bigint): bigint {
  switch (op) {
    case 'min':
      return a < b ? a : b;
    case 'max':
      return a > b ? a : b;
    case 'product':
      return a * b;
    case 'band':
      return a & b;
    case 'bor':
      return a | b;
    case 'bxor':
      return a ^ b;
    case 'sum':
    case 'average':
      return a + b;
  }
}

/** The ops that work on the bits of integers: exact in 32-bit integers for every dtype up to 32 bits. */
const kBitOps: Partial<Record<ReduceOp, (a: number, b: number) => number>> = {
  product: Math.imul,
  band: (a, b) => a & b,
  bor: (a, b) => a | b,
  bxor: (a, b) => a ^ b,
};

export function expectedAllreduce(dtype: DType, op: ReduceOp, inputs: readonly TypedArray[]): TypedArray {
  const count = inputs[0]?.length ?? 0;
  const out = new (constructorOf(dtype))(count);
  if (count === 0 || inputs.length === 0) return out;
  if (isBigInt(dtype)) {
    const wide = out as BigInt64Array;
    for (let i = 0; i < count; i++) {
      let acc = inputs[0]?.[i] as bigint;
      for (let r = 1; r < inputs.length; r++) acc = combine(op, acc, inputs[r]?.[i] as bigint);
      wide[i] = dtype === 'int64' ? BigInt.asIntN(64, acc) : BigInt.asUintN(64, acc);
    }
    return out;
  }
  const bitOp = isFloat(dtype) ? undefined : kBitOps[op];
  if (bitOp) {
    // The low 32 bits of a product (or a bitwise op) depend only on the low 32 bits of its
    // operands: Math.imul is exact there, and the store below keeps the dtype's low bits.
    const acc = Int32Array.from(inputs[0] as Int32Array);
    for (const input of inputs.slice(1)) {
      const x = input as Int32Array;
      for (let i = 0; i < count; i++) acc[i] = bitOp(acc[i] as number, x[i] as number);
    }
    out.set(acc as never);
    return out;
  }
  if (op === 'band' || op === 'bor' || op === 'bxor') throw new Error(`reduce op '${op}' is for integer dtypes, not ${dtype}`);
  // Rank by rank over the whole array, in doubles: exact for these integers (|sum| < 2^53).
  const acc = Float64Array.from(inputs[0] as Float64Array);
  for (const input of inputs.slice(1)) {
    const x = input as Float64Array;
    if (op === 'min') for (let i = 0; i < count; i++) acc[i] = Math.min(acc[i] as number, x[i] as number);
    else if (op === 'max') for (let i = 0; i < count; i++) acc[i] = Math.max(acc[i] as number, x[i] as number);
    else if (op === 'product') for (let i = 0; i < count; i++) acc[i] = (acc[i] as number) * (x[i] as number);
    else for (let i = 0; i < count; i++) acc[i] = (acc[i] as number) + (x[i] as number);
  }
  if (op === 'average') for (let i = 0; i < count; i++) acc[i] = (acc[i] as number) / inputs.length;
  // A typed-array store converts modulo 2^bits (ECMAScript ToInt8 ... ToUint32): C's cast.
  out.set(acc as never);
  return out;
}

/** Every array after the other, as allgather concatenates the ranks' tensors. */
export function concatenated(dtype: DType, parts: readonly TypedArray[]): TypedArray {
  const out = new (constructorOf(dtype))(parts.reduce((n, part) => n + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part as never, offset);
    offset += part.length;
  }
  return out;
}

/*
 * Memoized references. Every rank of a conformance case builds every rank's input and the
 * expected result itself; when the ranks share a process (the in-process worlds) they share
 * these instead of computing them N times each. The arrays returned are shared: never modify
 * one, and never hand one to the library (pass a copy: `.slice()`).
 */
const kCacheBytes = 256 * 1024 * 1024;
const cache = new Map<string, TypedArray>();
let cachedBytes = 0;

function memoized(key: string, make: () => TypedArray): TypedArray {
  const hit = cache.get(key);
  if (hit) {
    // Most recently used last: the oldest entries go first.
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const value = make();
  cache.set(key, value);
  cachedBytes += value.byteLength;
  for (const [oldKey, old] of cache) {
    if (cachedBytes <= kCacheBytes || oldKey === key) break;
    cache.delete(oldKey);
    cachedBytes -= old.byteLength;
  }
  return value;
}

/** makeInput, shared (see above): read only. */
export function referenceInput(dtype: DType, rank: number, count: number, op: ReduceOp): TypedArray {
  return memoized(`in/${dtype}/${op}/${rank}/${count}`, () => makeInput(dtype, rank, count, op));
}

/** Every rank's referenceInput, rank order. */
export function referenceInputs(dtype: DType, size: number, count: number, op: ReduceOp): TypedArray[] {
  return Array.from({ length: size }, (_, rank) => referenceInput(dtype, rank, count, op));
}

/** The allreduce of every rank's referenceInput in a job of `size`, shared (see above): read only. */
export function referenceAllreduce(dtype: DType, op: ReduceOp, count: number, size: number): TypedArray {
  return memoized(`ar/${dtype}/${op}/${size}/${count}`, () =>
    expectedAllreduce(dtype, op, referenceInputs(dtype, size, count, op)),
  );
}

/** Whether two typed arrays hold the same bytes (nothing of Node's: browser ranks run this too). */
function sameBytes(a: TypedArray, b: TypedArray): boolean {
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** Exact equality for integers; relative tolerance for floats. Returns a message on the first difference. */
export function compareArrays(dtype: DType, actual: TypedArray, expected: TypedArray): string | undefined {
  if (actual.constructor !== expected.constructor) return `class ${actual.constructor.name} != ${expected.constructor.name}`;
  if (actual.length !== expected.length) return `length ${actual.length} != ${expected.length}`;
  if (!isFloat(dtype)) {
    // Equal integers are equal bytes: one memcmp, and a search for the first difference only on failure.
    if (sameBytes(actual, expected)) return undefined;
    for (let i = 0; i < actual.length; i++) {
      if (actual[i] !== expected[i]) return `[${i}] ${actual[i]} != ${expected[i]}`;
    }
    return undefined;
  }
  const tolerance = dtype === 'float32' ? 1e-5 : 1e-12;
  const a = actual as Float64Array;
  const e = expected as Float64Array;
  for (let i = 0; i < a.length; i++) {
    const an = a[i] as number;
    const en = e[i] as number;
    // Written so that a NaN fails (unless expected).
    if (!(Math.abs(an - en) <= tolerance * Math.max(1, Math.abs(en))) && !(Number.isNaN(an) && Number.isNaN(en))) {
      return `[${i}] ${an} != ${en}`;
    }
  }
  return undefined;
}

/*
 * References of the collectives that split or move rows (reducescatter, alltoall, gather,
 * scatter), and of the scale factors. Arrays are flat, `rowLength` elements per row (first
 * dimension rows); they are computed here independently of the library's own split helpers.
 */

/** Rows of each rank when `rows` rows are split over `size` ranks as evenly as possible: the first rows % size ranks get one more. */
export function evenSplits(rows: number, size: number): number[] {
  return Array.from({ length: size }, (_, r) => Math.floor(rows / size) + (r < rows % size ? 1 : 0));
}

/** Where each of `counts` starts when they follow each other from 0. */
export function offsetsOf(counts: readonly number[]): number[] {
  const offsets: number[] = [];
  let at = 0;
  for (const n of counts) {
    offsets.push(at);
    at += n;
  }
  return offsets;
}

/** A copy of rows [start, start + rows) of a flat array of `rowLength` elements per row. */
export function rowSlice(array: TypedArray, start: number, rows: number, rowLength: number): TypedArray {
  return array.slice(start * rowLength, (start + rows) * rowLength);
}

/**
 * What rank `rank` receives in an alltoall where rank i's input is inputs[i] and it sends
 * splits[i][j] rows to rank j: every rank's rows for `rank`, in rank order.
 */
export function expectedAlltoall(
  dtype: DType,
  inputs: readonly TypedArray[],
  splits: readonly (readonly number[])[],
  rowLength: number,
  rank: number,
): TypedArray {
  return concatenated(
    dtype,
    inputs.map((input, i) => {
      const mine = splits[i] as readonly number[];
      return rowSlice(input, offsetsOf(mine)[rank] as number, mine[rank] as number, rowLength);
    }),
  );
}

/**
 * The allreduce of `inputs` with Horovod's scale factors: each input multiplied by `prescale`
 * (and stored in its dtype, as the library scales it in place), reduced, then multiplied by
 * `postscale`. Float dtypes only.
 */
export function expectedScaledAllreduce(
  dtype: DType,
  op: ReduceOp,
  inputs: readonly TypedArray[],
  prescale: number,
  postscale: number,
): TypedArray {
  if (!isFloat(dtype)) throw new Error(`scale factors are for float dtypes, not ${dtype}`);
  const scaled = inputs.map((input) => {
    const copy = input.slice() as Float64Array;
    for (let i = 0; i < copy.length; i++) copy[i] = (copy[i] as number) * prescale;
    return copy;
  });
  const out = expectedAllreduce(dtype, op, scaled) as Float64Array;
  for (let i = 0; i < out.length; i++) out[i] = (out[i] as number) * postscale;
  return out;
}

/** expectedScaledAllreduce of every rank's referenceInput in a job of `size`, shared (see above): read only. */
export function referenceScaledAllreduce(
  dtype: DType,
  op: ReduceOp,
  count: number,
  size: number,
  prescale: number,
  postscale: number,
): TypedArray {
  return memoized(`ar-scaled/${dtype}/${op}/${size}/${count}/${prescale}/${postscale}`, () =>
    expectedScaledAllreduce(dtype, op, referenceInputs(dtype, size, count, op), prescale, postscale),
  );
}
