/**
 * Reduce kernels: dst[d + i] = op(dst[d + i], src[s + i]) for i in [0, length).
 *
 * Integer semantics are C's wrap-around: sums and products of 8/16-bit values are exact doubles
 * that the typed array store wraps; 32-bit sums are exact below 2^33 and wrap the same way, but a
 * 32-bit product can reach 2^64, beyond the 2^53 a double holds, so it goes through Math.imul;
 * 64-bit values are BigInts, exact, and the BigInt64Array store wraps them mod 2^64. Float min
 * and max use Math.min/Math.max so a NaN on any rank wins whatever the order of reduction.
 * The bitwise ops (band, bor, bxor) exist for integers only: JavaScript's & | ^ work on the
 * 32-bit two's complement, which holds every 8-to-32-bit value of either signedness bit for bit,
 * and the store keeps the low bits; BigInt's & | ^ are two's complement too, so 64-bit ones are exact.
 *
 * One loop per (dtype family, op), never a closure or a switch inside a loop: the families
 * (float, 8/16-bit, 32-bit, 64-bit) keep at most four typed array kinds behind each element
 * access, which V8 still handles as polymorphic rather than megamorphic. Callers pick a kernel
 * once per call through a KernelSelector, which is also the seam where a WebAssembly SIMD
 * implementation can replace these loops.
 *
 * 'average' has no kernel: it is a sum finished by a division. The algorithms learn that from
 * here only: `reduceDType` checks the op against the dtype, `elementwiseOf` names the kernel's op
 * and `finishOf` the division.
 */
import { checkReduceOp, dtypeOf } from '../core/dtypes.js';

export { type BitwiseOp, checkReduceOp, isBitwise, reduceOpFits } from '../core/dtypes.js';

import { InvalidArgumentError } from '../core/errors.js';
import { Float16Bits } from '../core/float16.js';
import type { ReduceOp, TypedArray, WireDType } from '../core/types.js';
import { divideHalves, maxHalf, minHalf, productHalf, scaleHalves, sumHalf } from './reduce_half.js';

/** The element-wise operations; 'average' is a sum finished by `divideInPlace` (see `elementwiseOf`). */
export type ElementwiseOp = Exclude<ReduceOp, 'average'>;
/** The element-wise operations defined on integer dtypes only. */

export type ReduceKernel = (dst: TypedArray, dstOffset: number, src: TypedArray, srcOffset: number, length: number) => void;

/** Picks the kernel for a dtype and an operation; called once per collective, not per segment. */
export type KernelSelector = (dtype: WireDType, op: ElementwiseOp) => ReduceKernel;

type Floats = Float32Array | Float64Array;
type SmallInts = Int8Array | Int16Array | Uint8Array | Uint16Array;
type Ints32 = Int32Array | Uint32Array;
type BigInts = BigInt64Array | BigUint64Array;

function sumFloat(dst: Floats, d: number, src: Floats, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i];
}
function productFloat(dst: Floats, d: number, src: Floats, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] *= src[s + i];
}
function minFloat(dst: Floats, d: number, src: Floats, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] = Math.min(dst[d + i], src[s + i]);
}
function maxFloat(dst: Floats, d: number, src: Floats, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] = Math.max(dst[d + i], src[s + i]);
}

function sumSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i];
}
function productSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] *= src[s + i];
}
function minSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b < dst[d + i]) dst[d + i] = b;
  }
}
function maxSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b > dst[d + i]) dst[d + i] = b;
  }
}

function andSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] &= src[s + i];
}
function orSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] |= src[s + i];
}
function xorSmall(dst: SmallInts, d: number, src: SmallInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] ^= src[s + i];
}

function sum32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i];
}
function product32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] = Math.imul(dst[d + i], src[s + i]);
}
function min32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b < dst[d + i]) dst[d + i] = b;
  }
}
function max32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b > dst[d + i]) dst[d + i] = b;
  }
}

function and32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] &= src[s + i];
}
function or32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] |= src[s + i];
}
function xor32(dst: Ints32, d: number, src: Ints32, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] ^= src[s + i];
}

function sumBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i];
}
function productBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] *= src[s + i];
}
function minBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b < dst[d + i]) dst[d + i] = b;
  }
}
function maxBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const b = src[s + i];
    if (b > dst[d + i]) dst[d + i] = b;
  }
}

function andBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] &= src[s + i];
}
function orBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] |= src[s + i];
}
function xorBig(dst: BigInts, d: number, src: BigInts, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] ^= src[s + i];
}

// Partial: floats have no bitwise kernels.
type KernelSet = Readonly<Partial<Record<ElementwiseOp, ReduceKernel>>>;

// The casts are sound: a kernel is only ever called with two arrays of the dtype it was picked for.
const kFloat = Object.freeze({ sum: sumFloat, product: productFloat, min: minFloat, max: maxFloat }) as KernelSet;
// fp16 compression's wire dtype: decoded, combined in float32, re-encoded (reduce_half.ts).
const kHalf = Object.freeze({ sum: sumHalf, product: productHalf, min: minHalf, max: maxHalf }) as KernelSet;
const kSmall = Object.freeze({
  sum: sumSmall,
  product: productSmall,
  min: minSmall,
  max: maxSmall,
  band: andSmall,
  bor: orSmall,
  bxor: xorSmall,
}) as KernelSet;
const k32 = Object.freeze({
  sum: sum32,
  product: product32,
  min: min32,
  max: max32,
  band: and32,
  bor: or32,
  bxor: xor32,
}) as KernelSet;
const kBig = Object.freeze({
  sum: sumBig,
  product: productBig,
  min: minBig,
  max: maxBig,
  band: andBig,
  bor: orBig,
  bxor: xorBig,
}) as KernelSet;

const kKernels: Readonly<Record<WireDType, KernelSet>> = Object.freeze({
  float32: kFloat,
  float64: kFloat,
  int8: kSmall,
  int16: kSmall,
  uint8: kSmall,
  uint16: kSmall,
  int32: k32,
  uint32: k32,
  int64: kBig,
  uint64: kBig,
  float16: kHalf,
});

/** The portable JavaScript kernels. */
export const selectKernel: KernelSelector = (dtype, op) => {
  const set = kKernels[dtype];
  // hasOwn: an op name like 'toString' must not find Object.prototype's.
  const kernel = set !== undefined && Object.hasOwn(set, op) ? set[op] : undefined;
  if (kernel === undefined) {
    checkReduceOp(dtype, op);
    throw new InvalidArgumentError(`no reduce kernel for dtype ${dtype} and op ${op}`);
  }
  return kernel;
};

/** dst[i] = op(dst[i], src[i]) over the whole arrays, which must have the same dtype and length. */
export function reduceInto(op: ElementwiseOp, dst: TypedArray, src: TypedArray, kernels = selectKernel): void {
  const dtype = dtypeOf(dst);
  if (dtype === undefined) throw new InvalidArgumentError('dst must be a supported typed array');
  if (dtypeOf(src) !== dtype) throw new InvalidArgumentError(`src must be a ${dtype} array like dst`);
  if (src.length !== dst.length) {
    throw new InvalidArgumentError(`src has ${src.length} elements, dst has ${dst.length}`);
  }
  kernels(dtype, op)(dst, 0, src, 0, dst.length);
}

/** The arrays of the float dtypes: float16 ones hold fp16 bits (Float16Bits). */
export type FloatArray = Float32Array | Float64Array | Float16Bits;

/** Finishes an 'average': buf[offset + i] /= divisor. Dividing (not multiplying by 1/n) keeps it correctly rounded. */
export function divideInPlace(buf: FloatArray, divisor: number, offset = 0, length = buf.length - offset): void {
  if (buf instanceof Float16Bits) divideHalves(buf, divisor, offset, length);
  else for (let i = 0; i < length; i++) buf[offset + i] /= divisor;
}

/** Horovod's prescale and postscale factors: buf[offset + i] *= factor. */
export function scaleInPlace(buf: FloatArray, factor: number, offset = 0, length = buf.length - offset): void {
  // 1 is both factors' default: skip the pass over the tensor that would rewrite it unchanged.
  if (factor === 1) return;
  if (buf instanceof Float16Bits) scaleHalves(buf, factor, offset, length);
  else for (let i = 0; i < length; i++) buf[offset + i] *= factor;
}

/** The dtype of a buffer to reduce with `op`, after checking that the two go together. */
export function reduceDType(buf: TypedArray, op: ReduceOp): WireDType {
  const dtype = dtypeOf(buf);
  if (dtype === undefined) throw new InvalidArgumentError('buf must be a supported typed array');
  checkReduceOp(dtype, op);
  return dtype;
}

/** The element-wise op whose kernel reduces for `op`: 'average' reduces as a sum, `finishOf` does the rest. */
export function elementwiseOf(op: ReduceOp): ElementwiseOp {
  return op === 'average' ? 'sum' : op;
}

/** Completes, in place, a range of a buffer already reduced element-wise. */
export type FinishReduce = (buf: TypedArray, offset: number, length: number) => void;

/**
 * What turns the element-wise reduction of `ranks` buffers into the result of `op`: the division
 * of an 'average', or undefined when the element-wise result is already it. Call it on a buffer
 * `reduceDType` accepted for `op` (an 'average' buffer is then a float one).
 */
export function finishOf(op: ReduceOp, ranks: number): FinishReduce | undefined {
  if (op !== 'average') return undefined;
  return (buf, offset, length) => divideInPlace(buf as FloatArray, ranks, offset, length);
}
