/**
 * IEEE binary16 (fp16), the wire form of the collectives' `compression: 'fp16'`: 1 sign bit, 5
 * exponent bits (bias 15), 10 fraction bits; largest finite 65504, smallest subnormal 2^-24.
 *
 * Encoding works on the float32 bits (a Uint32Array view of the input, so the value is float32
 * first, as the reduction kernels want: they compute in float32 and re-encode) and rounds to
 * nearest, ties to even, like a hardware conversion: normal results round by adding 0xfff plus
 * the kept lowest bit (a carry runs into the exponent, and from 65520 up into Infinity);
 * subnormal results shift the 24-bit significand right and round the bits shifted out. NaN stays
 * NaN (quieted, sign and top payload bits kept). Decoding is one lookup in a 65536-entry table
 * built from bits, so every half, NaN payloads included, maps to its exact float32.
 */

/** fp16 bits in a Uint16Array: a class of its own so that dtypeOf tells the wire dtype 'float16' from 'uint16'. */
export class Float16Bits extends Uint16Array {}

/** float32 bits of every fp16 value, indexed by its bits. */
const kDecodeBits = buildDecodeBits();
/** The same table as float32 values: what the kernels read. */
export const kHalfToFloat: Float32Array = new Float32Array(kDecodeBits.buffer);

function buildDecodeBits(): Uint32Array {
  const table = new Uint32Array(65536);
  const scratch = new Float32Array(1);
  const scratchBits = new Uint32Array(scratch.buffer);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exponent = (h >>> 10) & 0x1f;
    const fraction = h & 0x3ff;
    if (exponent === 0x1f) {
      table[h] = (sign | 0x7f800000 | (fraction << 13)) >>> 0;
    } else if (exponent === 0) {
      // Subnormal (or zero): fraction · 2^-24, exact in float32.
      scratch[0] = fraction * 2 ** -24;
      table[h] = (sign | (scratchBits[0] as number)) >>> 0;
    } else {
      // Rebias the exponent from 15 to 127.
      table[h] = (sign | ((exponent + 112) << 23) | (fraction << 13)) >>> 0;
    }
  }
  return table;
}

/** The fp16 bits nearest (ties to even) to the float32 whose bits are `bits`. */
export function halfFromFloatBits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs >= 0x47800000) {
    // 65536 or more, Infinity, or NaN.
    if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >>> 13) & 0x3ff);
    return sign | 0x7c00;
  }
  if (abs >= 0x38800000) {
    // Normal fp16 range (from 2^-14): rebias the exponent by 127 - 15, then round off 13 bits.
    const m = abs - 0x38000000;
    return sign | ((m + 0xfff + ((m >>> 13) & 1)) >>> 13);
  }
  // Below 2^-25 everything rounds to zero (2^-25 itself is a tie, which goes to the even 0).
  if (abs < 0x33000000) return sign;
  const exponent = abs >>> 23;
  const significand = (abs & 0x7fffff) | 0x800000;
  // value = significand · 2^(exponent-150); in units of 2^-24 that is significand >> (126 - exponent).
  const shift = 126 - exponent;
  let q = significand >>> shift;
  const rest = significand & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (q & 1) === 1)) q++;
  return sign | q;
}

/** The fp16 bits nearest to `value` (rounded to float32 first): for single values; arrays take encodeHalves. */
export function halfFromFloat(value: number): number {
  const f = new Float32Array(1);
  f[0] = value;
  return halfFromFloatBits(new Uint32Array(f.buffer)[0] as number);
}

/** The float32 value of fp16 `bits`. */
export function floatFromHalf(bits: number): number {
  return kHalfToFloat[bits & 0xffff] as number;
}

/** dst[i] = fp16(src[i]) for every i (dst at least as long as src). */
export function encodeHalves(src: Float32Array, dst: Uint16Array): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const n = src.length;
  for (let i = 0; i < n; i++) dst[i] = halfFromFloatBits(bits[i] as number);
}

/** dst[i] = float32(src[i]) for every i (dst at least as long as src). */
export function decodeHalves(src: Uint16Array, dst: Float32Array): void {
  const table = kHalfToFloat;
  const n = src.length;
  for (let i = 0; i < n; i++) dst[i] = table[src[i] as number] as number;
}
