/**
 * Seeded test data and a serial reference reduction for the algorithm and kernel tests. The
 * reference works in exact arithmetic (BigInt, or doubles while they are exact) and wraps once
 * (bitwise ops: at every step, explicitly), so that it shares no code path with the kernels it checks.
 */
import { constructorOf, isBigInt, isFloat } from '../../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';

export type Random = () => number;

/** mulberry32: uniform 32-bit unsigned integers from a seed. */
export function seeded(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

const kBits: Partial<Record<DType, number>> = { int8: 8, int16: 16, int32: 32, uint8: 8, uint16: 16, uint32: 32 };

/** The reduce ops defined on `dtype`: 'average' for floats only, the bitwise ones for integers only. */
export function opsFor(dtype: DType): ReduceOp[] {
  return isFloat(dtype) ? ['sum', 'average', 'min', 'max', 'product'] : ['sum', 'min', 'max', 'product', 'band', 'bor', 'bxor'];
}

/**
 * Random values over the whole range of an integer dtype (random bits, so 64-bit ones lie far
 * beyond 2^53); floats in [-1, 1), or in [0.5, 1.5) for products so that they neither vanish
 * nor overflow.
 */
export function randomArray(dtype: DType, length: number, random: Random, forProduct = false): TypedArray {
  const out = new (constructorOf(dtype))(length);
  if (isFloat(dtype)) {
    const floats = out as Float32Array | Float64Array;
    for (let i = 0; i < length; i++) {
      const unit = random() / 2 ** 32;
      floats[i] = forProduct ? 0.5 + unit : 2 * unit - 1;
    }
    return out;
  }
  const words = new Uint32Array(Math.ceil(out.byteLength / 4));
  for (let i = 0; i < words.length; i++) words[i] = random();
  new Uint8Array(out.buffer).set(new Uint8Array(words.buffer, 0, out.byteLength));
  return out;
}

/** The low 32 bits of a * b for 32-bit a and b, from 16-bit halves so every partial product is exact. */
function mulLow32(a: number, b: number): number {
  const au = a >>> 0;
  const bu = b >>> 0;
  const cross = ((au >>> 16) * (bu & 0xffff) + (au & 0xffff) * (bu >>> 16)) % 0x10000;
  return (cross * 0x10000 + (au & 0xffff) * (bu & 0xffff)) % 2 ** 32;
}

/** a mod 2^bits as the signed or unsigned value of that width. */
function wrapNumber(value: number, bits: number, signed: boolean): number {
  const modulus = 2 ** bits;
  const low = ((value % modulus) + modulus) % modulus;
  return signed && low >= modulus / 2 ? low - modulus : low;
}

function wrap(dtype: DType, value: bigint): bigint {
  return dtype === 'int64' ? BigInt.asIntN(64, value) : BigInt.asUintN(64, value);
}

/**
 * acc[i] = acc[i] op x[i] for integers of at most 32 bits, wrapped to the value of their own width
 * and signedness here (the kernels leave that to the typed array store).
 */
function bitwise(op: 'band' | 'bor' | 'bxor', acc: Float64Array, x: ArrayLike<number>, bits: number, signed: boolean): void {
  if (bits === 0) throw new Error(`no float reference for ${op}`);
  const n = acc.length;
  if (op === 'band') for (let i = 0; i < n; i++) acc[i] = wrapNumber((acc[i] as number) & (x[i] as number), bits, signed);
  else if (op === 'bor') for (let i = 0; i < n; i++) acc[i] = wrapNumber((acc[i] as number) | (x[i] as number), bits, signed);
  else for (let i = 0; i < n; i++) acc[i] = wrapNumber((acc[i] as number) ^ (x[i] as number), bits, signed);
}

/**
 * The reduction of `inputs` (one array per rank) in rank order. Integers are exact with
 * wrap-around; floats are computed in float64 (compare with a tolerance, except min and max).
 */
export function referenceReduce(dtype: DType, op: ReduceOp, inputs: readonly TypedArray[]): TypedArray {
  const length = inputs[0]?.length ?? 0;
  const out = new (constructorOf(dtype))(length);
  if (isBigInt(dtype)) {
    const ins = inputs as readonly (BigInt64Array | BigUint64Array)[];
    const target = out as BigInt64Array | BigUint64Array;
    for (let i = 0; i < length; i++) {
      let acc = ins[0]?.[i] as bigint;
      for (let r = 1; r < ins.length; r++) {
        const x = ins[r]?.[i] as bigint;
        if (op === 'sum') acc += x;
        else if (op === 'product')
          acc = wrap(dtype, acc * x); // keeps the BigInt small
        else if (op === 'min') {
          if (x < acc) acc = x; // BigInts: no Math.min
        } else if (op === 'max') {
          if (x > acc) acc = x;
        } else if (op === 'band') acc &= x;
        else if (op === 'bor') acc |= x;
        else if (op === 'bxor') acc ^= x;
        else throw new Error(`no integer reference for ${op}`);
      }
      target[i] = wrap(dtype, acc);
    }
    return out;
  }
  // Doubles hold every value of the other dtypes, and integer sums of a few ranks, exactly.
  const rows = inputs as readonly Exclude<TypedArray, BigInt64Array | BigUint64Array>[];
  const acc = new Float64Array(length);
  for (let i = 0; i < length; i++) acc[i] = rows[0]?.[i] as number;
  const bits = kBits[dtype] ?? 0;
  const signed = dtype.startsWith('int');
  for (const x of rows.slice(1)) {
    // One plain loop per op: this runs over millions of elements per test file.
    if (op === 'sum' || op === 'average') for (let i = 0; i < length; i++) acc[i] += x[i] as number;
    else if (op === 'min') for (let i = 0; i < length; i++) acc[i] = Math.min(acc[i] as number, x[i] as number);
    else if (op === 'max') for (let i = 0; i < length; i++) acc[i] = Math.max(acc[i] as number, x[i] as number);
    else if (op === 'band' || op === 'bor' || op === 'bxor') bitwise(op, acc, x, bits, signed);
    else if (isFloat(dtype)) for (let i = 0; i < length; i++) acc[i] *= x[i] as number;
    else if (bits === 32)
      for (let i = 0; i < length; i++) acc[i] = wrapNumber(mulLow32(acc[i] as number, x[i] as number), 32, signed);
    else for (let i = 0; i < length; i++) acc[i] = wrapNumber((acc[i] as number) * (x[i] as number), bits, signed);
  }
  if (op === 'average') for (let i = 0; i < length; i++) acc[i] = (acc[i] as number) / inputs.length;
  // The store rounds to float32, or reduces an exact integer mod 2^bits: the one wrap-around.
  (out as Float64Array).set(acc);
  return out;
}

/**
 * How far a result of `terms` inputs may be from the float64 reference: 0 (exact) for integers
 * and for float min and max; for float sums and products, a bound well above the error of any
 * order of reassociation of values in [-1, 1) or [0.5, 1.5), relative to max(1, |expected|).
 */
export function toleranceFor(dtype: DType, op: ReduceOp, terms: number): number {
  if (!isFloat(dtype) || op === 'min' || op === 'max') return 0;
  return (dtype === 'float32' ? 2 ** -24 : 2 ** -53) * 4 * terms;
}

/** Index and values of the first element where `actual` is off, or undefined. */
export function firstMismatch(actual: TypedArray, expected: TypedArray, tolerance: number): string | undefined {
  if (actual.length !== expected.length) return `length ${actual.length} != ${expected.length}`;
  if (tolerance === 0 && sameBytes(actual, expected)) return undefined;
  const isBig = actual instanceof BigInt64Array || actual instanceof BigUint64Array;
  const got = isBig ? actual : new Float64Array(actual as ArrayLike<number>);
  const want = isBig ? expected : new Float64Array(expected as ArrayLike<number>);
  for (let i = 0; i < actual.length; i++) {
    const a = got[i] as number | bigint;
    const e = want[i] as number | bigint;
    const ok =
      tolerance === 0
        ? Object.is(a, e)
        : Math.abs((a as number) - (e as number)) <= tolerance * Math.max(1, Math.abs(e as number));
    if (!ok) return `[${i}] = ${a}, expected ${e}`;
  }
  return undefined;
}

/** Whether two arrays hold the same bytes. */
export function sameBytes(a: TypedArray, b: TypedArray): boolean {
  return (
    Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0
  );
}
