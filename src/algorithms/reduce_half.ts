/**
 * Reduce kernels for 'float16', the wire dtype of fp16 compression: each element is decoded to
 * float32 (a table lookup), combined in float32, and re-encoded to fp16 rounding to nearest even.
 * Computing in float32 rather than in fp16 keeps one rounding per step, as Horovod's fp16
 * compression does on GPUs (half2 arithmetic widens to float for the sum).
 *
 * JavaScript computes a + b of two decoded halves exactly in double; storing it in a Float32Array
 * rounds it to float32 (the float32 sum), and the float32 bits are then rounded to fp16. Products
 * of two halves are exact in float32 already. min and max pick one operand, so they are exact.
 * The WebAssembly SIMD kernels (wasm/half_kernels.ts, through reduce_wasm.ts) give the same bits,
 * NaN payloads aside, about twice as fast; these serve short runs and runtimes without SIMD.
 */
import { halfFromFloatBits, kHalfToFloat } from '../core/float16.js';

type Half = Uint16Array;

/** A float32 cell and its bits, shared by the kernels (one thread runs them): where a result is rounded to float32 before fp16. */
const f = new Float32Array(1);
const u = new Uint32Array(f.buffer);

export function sumHalf(dst: Half, d: number, src: Half, s: number, n: number): void {
  const t = kHalfToFloat;
  for (let i = 0; i < n; i++) {
    f[0] = (t[dst[d + i] as number] as number) + (t[src[s + i] as number] as number);
    dst[d + i] = halfFromFloatBits(u[0] as number);
  }
}

export function productHalf(dst: Half, d: number, src: Half, s: number, n: number): void {
  const t = kHalfToFloat;
  for (let i = 0; i < n; i++) {
    f[0] = (t[dst[d + i] as number] as number) * (t[src[s + i] as number] as number);
    dst[d + i] = halfFromFloatBits(u[0] as number);
  }
}

export function minHalf(dst: Half, d: number, src: Half, s: number, n: number): void {
  const t = kHalfToFloat;
  for (let i = 0; i < n; i++) {
    // Math.min: a NaN on any rank wins, and -0 orders below +0, as for float32.
    f[0] = Math.min(t[dst[d + i] as number] as number, t[src[s + i] as number] as number);
    dst[d + i] = halfFromFloatBits(u[0] as number);
  }
}

export function maxHalf(dst: Half, d: number, src: Half, s: number, n: number): void {
  const t = kHalfToFloat;
  for (let i = 0; i < n; i++) {
    f[0] = Math.max(t[dst[d + i] as number] as number, t[src[s + i] as number] as number);
    dst[d + i] = halfFromFloatBits(u[0] as number);
  }
}

/** buf[offset + i] = fp16(float32(buf[offset + i]) · factor): the scale factors, in float32. */
export function scaleHalves(buf: Half, factor: number, offset: number, length: number): void {
  const t = kHalfToFloat;
  for (let i = offset; i < offset + length; i++) {
    f[0] = (t[buf[i] as number] as number) * factor;
    buf[i] = halfFromFloatBits(u[0] as number);
  }
}

/** buf[offset + i] = fp16(float32(buf[offset + i]) / divisor): an 'average' finished in float32. */
export function divideHalves(buf: Half, divisor: number, offset: number, length: number): void {
  const t = kHalfToFloat;
  for (let i = offset; i < offset + length; i++) {
    f[0] = (t[buf[i] as number] as number) / divisor;
    buf[i] = halfFromFloatBits(u[0] as number);
  }
}
