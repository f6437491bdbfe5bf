/**
 * WebAssembly SIMD reduce kernels, plugged into the algorithms through the `kernels` option
 * (a KernelSelector), with the JavaScript kernels of reduce.ts as the fallback: for the
 * (dtype, op) pairs SIMD has no instruction for (int8 product, 64-bit min/max), for short runs
 * where the copies cost more than they save, and where WebAssembly SIMD is unavailable. The
 * bitwise ops (band, bor, bxor) use v128.and/or/xor, one kernel for every integer dtype; on a
 * float dtype the selector throws the JavaScript selector's error. float16 (fp16 compression's
 * wire dtype) has kernels that decode, combine in f32x4 and re-encode (wasm/half_kernels.ts).
 *
 * How it works: WebAssembly can only compute on its own memory, and the tensors live in
 * SharedArrayBuffers the module cannot map. So a kernel call walks the run in chunks of
 * kChunkBytes: it copies the destination chunk and the source chunk into the module's memory,
 * runs the SIMD loop (16 bytes per instruction, rounded up to whole 64-byte blocks: the lanes
 * past the run compute on stale bytes and are never copied back), and copies the result out.
 * Three cache-resident copies plus the SIMD loop still beat the scalar loop about twofold.
 *
 * Results equal the JavaScript kernels': integer lanes wrap like typed-array stores, f32x4/f64x2
 * min and max propagate NaN and order -0 below +0 like Math.min/Math.max, and sums and products
 * are the same IEEE operations. Only a NaN's payload may differ (every rank runs the same kernel,
 * so the ranks still agree bit for bit).
 */
import type { TypedArray, WireDType } from '../core/types.js';
import { type ElementwiseOp, isBitwise, type KernelSelector, type ReduceKernel, selectKernel } from './reduce.js';
import { isSimdKernel, kPages, type SimdKernelName, simdModuleBytes } from './wasm/simd_module.js';

/** Bytes of each operand area: half the module's memory. */
const kChunkBytes = (kPages * 65536) / 2;
/** Below this many bytes per call the copies are not worth it: the scalar loop runs. */
export const kWasmMinBytes = 1024;

type SimdFn = (a: number, b: number, nbytes: number) => void;
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
/** The part of the WebAssembly global used here (the project's lib settings do not declare it). */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { readonly exports: Record<string, unknown> };
}

const kFamily: Readonly<Record<WireDType, string>> = {
  float32: 'f32',
  float64: 'f64',
  int8: 'i8',
  uint8: 'i8',
  int16: 'i16',
  uint16: 'i16',
  int32: 'i32',
  uint32: 'i32',
  int64: 'i64',
  uint64: 'i64',
  // Decoded, combined in float32 and re-encoded in SIMD (wasm/half_kernels.ts).
  float16: 'f16',
};

function kernelName(dtype: WireDType, op: ElementwiseOp): SimdKernelName | undefined {
  const family = kFamily[dtype];
  // Only reached for integer dtypes: selectKernel, called first, refuses bitwise ops on floats.
  if (isBitwise(op)) return `v128_${op}`;
  let suffix: string = op;
  if ((op === 'min' || op === 'max') && !family.startsWith('f')) {
    suffix = `${op}_${dtype.startsWith('u') ? 'u' : 's'}`;
  }
  const candidate = `${family}_${suffix}`;
  return isSimdKernel(candidate) ? candidate : undefined;
}

/**
 * A selector backed by one instance of the SIMD module (one per engine: the copies go through
 * its memory, so an instance must not be shared across threads), or undefined when this
 * runtime has no WebAssembly SIMD.
 */
export function createWasmKernels(): KernelSelector | undefined {
  const exports = instantiateSimd();
  if (exports === undefined) return undefined;
  const memory = exports.mem as WasmMemory;
  const cache = new Map<string, ReduceKernel>();
  return (dtype, op) => {
    const key = `${dtype}/${op}`;
    let kernel = cache.get(key);
    if (kernel === undefined) {
      const fallback = selectKernel(dtype, op);
      const name = kernelName(dtype, op);
      kernel = name === undefined ? fallback : simdKernel(exports[name] as SimdFn, memory, fallback);
      cache.set(key, kernel);
    }
    return kernel;
  };
}

/** The exports of a new instance of the SIMD module, or undefined when this runtime has no WebAssembly SIMD. */
export function instantiateSimd(): Record<string, unknown> | undefined {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  try {
    const bytes = simdModuleBytes();
    if (!wasm?.validate(bytes)) return undefined;
    return new wasm.Instance(new wasm.Module(bytes)).exports;
  } catch {
    return undefined;
  }
}

function simdKernel(run: SimdFn, memory: WasmMemory, fallback: ReduceKernel): ReduceKernel {
  // The views are made per call from the array's own class, so one closure serves every dtype.
  return (dst, dstOffset, src, srcOffset, length) => {
    const size = dst.BYTES_PER_ELEMENT;
    if (length * size < kWasmMinBytes) {
      fallback(dst, dstOffset, src, srcOffset, length);
      return;
    }
    const Ctor = dst.constructor as new (buffer: ArrayBuffer, byteOffset: number, length: number) => TypedArray;
    const chunk = kChunkBytes / size;
    const a = new Ctor(memory.buffer, 0, chunk);
    const b = new Ctor(memory.buffer, kChunkBytes, chunk);
    for (let i = 0; i < length; i += chunk) {
      const n = Math.min(chunk, length - i);
      a.set(dst.subarray(dstOffset + i, dstOffset + i + n) as never);
      b.set(src.subarray(srcOffset + i, srcOffset + i + n) as never);
      run(0, kChunkBytes, (n * size + 63) & ~63);
      dst.set(a.subarray(0, n) as never, dstOffset + i);
    }
  };
}
