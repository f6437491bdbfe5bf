/**
 * Reduce kernel throughput, JavaScript loops against WebAssembly SIMD, as the ring calls them:
 * 256 KiB segments reduced from pooled scratch into a SharedArrayBuffer tensor.
 *
 *   node dist/bench/reduce_kernels.js [MiB=64] [rounds=5]
 *
 * GB/s = bytes of the destination per second (the definition of ../shared/bench/membw.c).
 * JS and WASM alternate per round, so a slow phase of the shared machine hits both.
 */
import { performance } from 'node:perf_hooks';
import { type ElementwiseOp, type KernelSelector, selectKernel } from '../src/algorithms/reduce.js';
import { createWasmKernels } from '../src/algorithms/reduce_wasm.js';
import { constructorOf } from '../src/core/dtypes.js';
import type { DType } from '../src/core/types.js';

const kSegmentBytes = 256 * 1024;
const kCases: [DType, ElementwiseOp][] = [
  ['float32', 'sum'],
  ['float32', 'max'],
  ['float64', 'sum'],
  ['int32', 'sum'],
  ['int8', 'sum'],
  ['int64', 'sum'],
];

function gbps(kernels: KernelSelector, dtype: DType, op: ElementwiseOp, bytes: number): number {
  const Ctor = constructorOf(dtype);
  const n = bytes / Ctor.BYTES_PER_ELEMENT;
  const seg = kSegmentBytes / Ctor.BYTES_PER_ELEMENT;
  const dst = new Ctor(new SharedArrayBuffer(bytes), 0, n);
  const src = new Ctor(new ArrayBuffer(4 * kSegmentBytes), 0, 4 * seg);
  const kernel = kernels(dtype, op);
  const pass = () => {
    for (let o = 0, k = 0; o < n; o += seg, k = (k + 1) % 4) kernel(dst, o, src, k * seg, seg);
  };
  pass(); // first touch and JIT warm-up
  const start = performance.now();
  pass();
  pass();
  return (2 * bytes) / ((performance.now() - start) / 1000) / 1e9;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[s.length >> 1] as number;
}

const mib = Number(process.argv[2] ?? 64);
const rounds = Number(process.argv[3] ?? 5);
const wasm = createWasmKernels();
if (!wasm) console.log('WebAssembly SIMD is not available here: only the JavaScript kernels run');
console.log(`| dtype | op | JS GB/s | WASM SIMD GB/s | ratio |\n|---|---|---:|---:|---:|`);
for (const [dtype, op] of kCases) {
  const js: number[] = [];
  const simd: number[] = [];
  for (let r = 0; r < rounds; r++) {
    js.push(gbps(selectKernel, dtype, op, mib * 1024 * 1024));
    if (wasm) simd.push(gbps(wasm, dtype, op, mib * 1024 * 1024));
  }
  const w = wasm ? median(simd) : Number.NaN;
  console.log(`| ${dtype} | ${op} | ${median(js).toFixed(2)} | ${w.toFixed(2)} | ${(w / median(js)).toFixed(2)}× |`);
}
