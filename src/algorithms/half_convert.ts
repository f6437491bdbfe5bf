/**
 * float32 ⇄ fp16 conversion of whole arrays, for the caller's side of fp16 compression (the
 * input's encoding, the result's decoding): the WebAssembly SIMD conversions of
 * wasm/half_kernels.ts where the runtime has them, else the JavaScript loops of core/float16.ts,
 * with the same results (NaN payloads aside).
 *
 * Like the reduce kernels (reduce_wasm.ts), the SIMD path copies through the module's memory in
 * chunks (it cannot address the caller's buffers): float32 in the lower half, halves in the upper
 * half, whole 16-byte vectors (the lanes past the end compute on stale bytes and are never copied
 * out). Short arrays take the JavaScript loop, where the copies would cost more than they save.
 */
import { decodeHalves, encodeHalves } from '../core/float16.js';
import { instantiateSimd, type WasmMemory } from './reduce_wasm.js';
import { kPages } from './wasm/simd_module.js';

export interface HalfConverter {
  /** dst[i] = fp16(src[i]), rounded to nearest even (dst at least as long as src). */
  encode(src: Float32Array, dst: Uint16Array): void;
  /** dst[i] = float32(src[i]) (dst at least as long as src). */
  decode(src: Uint16Array, dst: Float32Array): void;
}

/** Elements below which the JavaScript loop runs. */
const kMinElements = 512;
/** Elements per chunk: their float32 fill the lower half of the module's memory. */
const kChunk = (kPages * 65536) / 2 / 4;
const kHalvesAt = (kPages * 65536) / 2;

export const kJsHalfConverter: HalfConverter = { encode: encodeHalves, decode: decodeHalves };

/** A converter backed by its own instance of the SIMD module (one per thread), or the JavaScript one. */
export function createHalfConverter(): HalfConverter {
  const exports = instantiateSimd();
  if (exports === undefined) return kJsHalfConverter;
  const memory = exports.mem as WasmMemory;
  const toHalves = exports.f32_to_f16 as (src: number, dst: number, n: number) => void;
  const toFloats = exports.f16_to_f32 as (src: number, dst: number, n: number) => void;
  const floats = new Float32Array(memory.buffer, 0, kChunk);
  const halves = new Uint16Array(memory.buffer, kHalvesAt, kChunk);
  const vectorBytes = (n: number) => (n * 2 + 15) & ~15;
  return {
    encode(src, dst) {
      if (src.length < kMinElements) {
        encodeHalves(src, dst);
        return;
      }
      for (let i = 0; i < src.length; i += kChunk) {
        const n = Math.min(kChunk, src.length - i);
        floats.set(src.subarray(i, i + n));
        toHalves(0, kHalvesAt, vectorBytes(n));
        dst.set(halves.subarray(0, n), i);
      }
    },
    decode(src, dst) {
      if (src.length < kMinElements) {
        decodeHalves(src, dst);
        return;
      }
      for (let i = 0; i < src.length; i += kChunk) {
        const n = Math.min(kChunk, src.length - i);
        halves.set(src.subarray(i, i + n));
        toFloats(kHalvesAt, 0, vectorBytes(n));
        dst.set(floats.subarray(0, n), i);
      }
    },
  };
}
