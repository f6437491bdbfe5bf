/**
 * The WebAssembly SIMD kernels must give the same values as the JavaScript kernels for every
 * dtype and op, at any offset and length (runs that are not whole vectors or chunks included),
 * with NaN, -0 and integer wrap-around in the data: identical bits, except that a NaN may carry
 * another payload (still a NaN, and the same on every rank since every rank runs one kernel).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ElementwiseOp } from '../../src/algorithms/reduce.js';
import { selectKernel } from '../../src/algorithms/reduce.js';
import { createWasmKernels, kWasmMinBytes } from '../../src/algorithms/reduce_wasm.js';
import { kSimdOps } from '../../src/algorithms/wasm/simd_module.js';
import { bytesPerElement, isFloat, kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { Float16Bits } from '../../src/core/float16.js';
import type { DType, TypedArray } from '../../src/core/types.js';
import { opsFor, randomArray, seeded } from './support/typed_data.js';

const kBitwiseOps = ['band', 'bor', 'bxor'] as const;
const wasm = createWasmKernels();

/** Every kernel op of a dtype ('average' is a sum plus a division, not a kernel). */
function kernelOpsFor(dtype: DType): ElementwiseOp[] {
  return opsFor(dtype).filter((op): op is ElementwiseOp => op !== 'average');
}

function withSpecials(array: TypedArray): TypedArray {
  if (array instanceof Float32Array || array instanceof Float64Array) {
    for (let i = 0; i < array.length; i += 97) array[i] = Number.NaN;
    for (let i = 13; i < array.length; i += 89) array[i] = -0;
    for (let i = 29; i < array.length; i += 83) array[i] = Number.POSITIVE_INFINITY;
  }
  return array;
}

/** Object.is per element: NaN equals NaN whatever its payload, -0 differs from +0. */
function sameValues(a: TypedArray, b: TypedArray): boolean {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

describe('WebAssembly SIMD reduce kernels', () => {
  it('are available on Node 20', () => {
    assert.ok(wasm, 'WebAssembly SIMD should validate on this runtime');
  });

  for (const dtype of kDTypes) {
    it(`${dtype}: every op gives the bits of the JavaScript kernel`, () => {
      const kernels = wasm ?? selectKernel;
      const random = seeded(dtype.length * 31 + 5);
      // Lengths below the threshold, odd lengths, more than one 64 KiB chunk.
      for (const length of [3, kWasmMinBytes + 5, 40_000, 70_001]) {
        for (const op of kernelOpsFor(dtype)) {
          const a = withSpecials(randomArray(dtype, length + 7, random, op === 'product'));
          const b = withSpecials(randomArray(dtype, length + 11, random, op === 'product'));
          const expected = a.slice();
          selectKernel(dtype, op)(expected, 7, b, 11, length);
          const actual = a.slice();
          kernels(dtype, op)(actual, 7, b, 11, length);
          assert.ok(sameValues(actual, expected), `${dtype} ${op} length ${length}`);
        }
      }
    });
  }

  it('run bitwise ops natively (v128.and/or/xor) for every integer dtype', () => {
    assert.ok(wasm);
    for (const op of kBitwiseOps) assert.ok(`v128_${op}` in kSimdOps, op);
    for (const dtype of kDTypes.filter((d) => !isFloat(d))) {
      for (const op of kBitwiseOps)
        assert.notEqual(wasm(dtype, op), selectKernel(dtype, op), `${dtype} ${op} is not the JS fallback`);
    }
  });

  it('bitwise: the bits of the JavaScript kernel at every length around the SIMD width and the 64-byte block', () => {
    assert.ok(wasm);
    const random = seeded(977);
    for (const dtype of kDTypes.filter((d) => !isFloat(d))) {
      const size = bytesPerElement(dtype);
      // Past the copy threshold, so the SIMD loop runs, then every remainder of a 16-byte vector and a 64-byte block.
      const base = Math.ceil(kWasmMinBytes / 64) * (64 / size);
      for (let extra = 0; extra <= 64 / size + 1; extra++) {
        const length = base + extra;
        for (const op of kBitwiseOps) {
          const a = randomArray(dtype, length + 3, random);
          const b = randomArray(dtype, length + 5, random);
          const expected = a.slice();
          selectKernel(dtype, op)(expected, 3, b, 5, length);
          const actual = a.slice();
          wasm(dtype, op)(actual, 3, b, 5, length);
          assert.deepEqual(actual, expected, `${dtype} ${op} length ${length}`);
        }
      }
    }
  });

  it("refuse bitwise ops on float dtypes with the JavaScript selector's message", () => {
    assert.ok(wasm);
    for (const dtype of ['float32', 'float64'] as const) {
      for (const op of kBitwiseOps) {
        assert.throws(
          () => wasm(dtype, op),
          (e: unknown) => e instanceof InvalidArgumentError && e.message === `op '${op}' needs an integer dtype, got ${dtype}`,
        );
      }
    }
  });
});

describe('WebAssembly SIMD kernels of float16 (fp16 compression)', () => {
  const isNaNHalf = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;

  it('equal the JavaScript kernels for every half against several partners, every op', { skip: !wasm }, () => {
    const n = 65536;
    for (const op of ['sum', 'product', 'min', 'max'] as const) {
      for (const partner of [0, 1, 7, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x8000, 12345]) {
        const a = new Float16Bits(n);
        const b = new Float16Bits(n);
        for (let i = 0; i < n; i++) {
          a[i] = i;
          b[i] = (i * 31 + partner) & 0xffff;
        }
        const js = a.slice() as Float16Bits;
        const simd = a.slice() as Float16Bits;
        selectKernel('float16', op)(js, 0, b, 0, n);
        (wasm as NonNullable<typeof wasm>)('float16', op)(simd, 0, b, 0, n);
        for (let i = 0; i < n; i++) {
          const [x, y] = [js[i] as number, simd[i] as number];
          if (x !== y && !(isNaNHalf(x) && isNaNHalf(y))) {
            assert.fail(
              `${op}: ${a[i]?.toString(16)} with ${b[i]?.toString(16)} gives ${x.toString(16)} in JS, ${y.toString(16)} in SIMD`,
            );
          }
        }
      }
    }
  });

  it('respect offsets and lengths that are not whole vectors', { skip: !wasm }, () => {
    const n = 3000;
    const a = new Float16Bits(n + 10).map((_, i) => 0x3c00 + (i % 500));
    const b = new Float16Bits(n + 10).map((_, i) => 0x3800 + (i % 300));
    const js = a.slice() as Float16Bits;
    const simd = a.slice() as Float16Bits;
    selectKernel('float16', 'sum')(js, 3, b, 7, n);
    (wasm as NonNullable<typeof wasm>)('float16', 'sum')(simd, 3, b, 7, n);
    assert.deepEqual([...simd], [...js]);
  });
});
