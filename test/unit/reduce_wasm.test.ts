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
import { kDTypes } from '../../src/core/dtypes.js';
import type { TypedArray } from '../../src/core/types.js';
import { randomArray, seeded } from './support/typed_data.js';

const kOps: ElementwiseOp[] = ['sum', 'min', 'max', 'product'];
const wasm = createWasmKernels();

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
        for (const op of kOps) {
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
});
