/**
 * Adasum's two loops over a piece of a pair of vectors: the dot product and both squared norms,
 * accumulated in float64 (as Horovod does), and the scaled add a = α·a + β·b. One loop per dtype
 * family: float32 and float64 arrays share theirs; 'float16' (fp16 compression's wire form) reads
 * its halves through the decoding table and rounds each result to float32, then to fp16, as the
 * other fp16 kernels do (reduce_half.ts).
 */
import { halfFromFloatBits, kHalfToFloat } from '../core/float16.js';
import type { TypedArray, WireDType } from '../core/types.js';

export interface AdasumKernels {
  /**
   * Adds own·other, then the squared norms of the lower vector and the upper one, to
   * sums[at], sums[at + 1], sums[at + 2]: `own` (buf[o..]) is the lower vector's piece when
   * `ownIsLower`, `other` (scratch[s..]) the other vector's piece.
   */
  dotAndNorms(
    own: TypedArray,
    o: number,
    other: TypedArray,
    s: number,
    n: number,
    sums: Float64Array,
    at: number,
    ownIsLower: boolean,
  ): void;
  /** own[o + i] = ownCoeff·own[o + i] + otherCoeff·other[s + i]. */
  scaledAdd(own: TypedArray, o: number, ownCoeff: number, other: TypedArray, s: number, otherCoeff: number, n: number): void;
}

type Floats = Float32Array | Float64Array;

const kFloatKernels: AdasumKernels = {
  dotAndNorms(own, o, other, s, n, sums, at, ownIsLower) {
    const a = own as Floats;
    const b = other as Floats;
    let dot = 0;
    let aa = 0;
    let bb = 0;
    for (let i = 0; i < n; i++) {
      const x = a[o + i] as number;
      const y = b[s + i] as number;
      dot += x * y;
      aa += x * x;
      bb += y * y;
    }
    addSums(sums, at, dot, aa, bb, ownIsLower);
  },
  scaledAdd(own, o, ownCoeff, other, s, otherCoeff, n) {
    const a = own as Floats;
    const b = other as Floats;
    for (let i = 0; i < n; i++) a[o + i] = ownCoeff * (a[o + i] as number) + otherCoeff * (b[s + i] as number);
  },
};

/** A float32 cell and its bits: where a half's new value is rounded to float32 before fp16. */
const f = new Float32Array(1);
const u = new Uint32Array(f.buffer);

const kHalfKernels: AdasumKernels = {
  dotAndNorms(own, o, other, s, n, sums, at, ownIsLower) {
    const t = kHalfToFloat;
    const a = own as Uint16Array;
    const b = other as Uint16Array;
    let dot = 0;
    let aa = 0;
    let bb = 0;
    for (let i = 0; i < n; i++) {
      const x = t[a[o + i] as number] as number;
      const y = t[b[s + i] as number] as number;
      dot += x * y;
      aa += x * x;
      bb += y * y;
    }
    addSums(sums, at, dot, aa, bb, ownIsLower);
  },
  scaledAdd(own, o, ownCoeff, other, s, otherCoeff, n) {
    const t = kHalfToFloat;
    const a = own as Uint16Array;
    const b = other as Uint16Array;
    for (let i = 0; i < n; i++) {
      f[0] = ownCoeff * (t[a[o + i] as number] as number) + otherCoeff * (t[b[s + i] as number] as number);
      a[o + i] = halfFromFloatBits(u[0] as number);
    }
  },
};

function addSums(sums: Float64Array, at: number, dot: number, own: number, other: number, ownIsLower: boolean): void {
  sums[at] = (sums[at] as number) + dot;
  sums[at + 1] = (sums[at + 1] as number) + (ownIsLower ? own : other);
  sums[at + 2] = (sums[at + 2] as number) + (ownIsLower ? other : own);
}

/** The kernels for `dtype` (a float dtype: adasum.ts checks it first). */
export function adasumKernelsFor(dtype: WireDType): AdasumKernels {
  return dtype === 'float16' ? kHalfKernels : kFloatKernels;
}
