import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { divideInPlace, type ElementwiseOp, reduceInto, selectKernel } from '../../src/algorithms/reduce.js';
import { constructorOf, kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import type { TypedArray } from '../../src/core/types.js';
import { firstMismatch, randomArray, referenceReduce, seeded } from './support/typed_data.js';

const kOps: ElementwiseOp[] = ['sum', 'min', 'max', 'product'];

describe('reduceInto', () => {
  for (const dtype of kDTypes) {
    it(`${dtype}: every op matches the exact reference element by element`, () => {
      const random = seeded(dtype.length * 7919);
      for (const op of kOps) {
        const a = randomArray(dtype, 777, random, op === 'product');
        const b = randomArray(dtype, 777, random, op === 'product');
        const expected = referenceReduce(dtype, op, [a, b]);
        const dst = a.slice();
        reduceInto(op, dst, b);
        // One operation per element: even floats must be exact (float32 rounds once either way).
        assert.equal(firstMismatch(dst, expected, 0), undefined, `${dtype} ${op}`);
      }
    });
  }

  it('wraps 8- and 16-bit integers like C', () => {
    const i8 = Int8Array.of(127, -128, 100);
    reduceInto('sum', i8, Int8Array.of(1, -1, 100));
    assert.deepEqual([...i8], [-128, 127, -56]);
    const u8 = Uint8Array.of(255, 16);
    reduceInto('product', u8, Uint8Array.of(2, 16));
    assert.deepEqual([...u8], [254, 0]);
    const i16 = Int16Array.of(-32768, 300);
    reduceInto('product', i16, Int16Array.of(-1, 300));
    assert.deepEqual([...i16], [-32768, 24464]); // 90000 mod 2^16
  });

  it('keeps all 32 bits of 32-bit products (where a double multiply loses them)', () => {
    const a = 123456789;
    const b = 987654321;
    assert.notEqual((a * b) | 0, Number(BigInt.asIntN(32, BigInt(a) * BigInt(b))), 'the case must defeat a plain *');
    const i32 = Int32Array.of(a, 0x7fffffff, -2147483648);
    reduceInto('product', i32, Int32Array.of(b, 0x7fffffff, -1));
    assert.deepEqual([...i32], [Number(BigInt.asIntN(32, BigInt(a) * BigInt(b))), 1, -2147483648]);
    const u32 = Uint32Array.of(0xffffffff, 0xfffffffe);
    reduceInto('product', u32, Uint32Array.of(0xffffffff, 0x80000001));
    assert.deepEqual([...u32], [1, Number(BigInt.asUintN(32, 0xfffffffen * 0x80000001n))]);
    const sum = Uint32Array.of(0xffffffff);
    reduceInto('sum', sum, Uint32Array.of(2));
    assert.equal(sum[0], 1);
  });

  it('is exact for 64-bit integers beyond 2^53 and wraps mod 2^64', () => {
    const i64 = BigInt64Array.of(2n ** 53n + 1n, 2n ** 62n, -(2n ** 63n));
    reduceInto('sum', i64, BigInt64Array.of(2n ** 53n + 2n, 2n ** 62n, -1n));
    assert.deepEqual([...i64], [2n ** 54n + 3n, -(2n ** 63n), 2n ** 63n - 1n]);
    const u64 = BigUint64Array.of(2n ** 63n + 3n, 2n ** 40n);
    reduceInto('product', u64, BigUint64Array.of(2n, 2n ** 30n + 1n));
    assert.deepEqual([...u64], [6n, BigInt.asUintN(64, 2n ** 70n + 2n ** 40n)]);
    const m = BigInt64Array.of(2n ** 60n + 1n, -5n);
    reduceInto('min', m, BigInt64Array.of(2n ** 60n, -(2n ** 62n)));
    assert.deepEqual([...m], [2n ** 60n, -(2n ** 62n)]);
  });

  it('propagates NaN through float min and max whichever side holds it', () => {
    for (const op of ['min', 'max'] as const) {
      const dst = Float64Array.of(Number.NaN, 1, 2);
      reduceInto(op, dst, Float64Array.of(1, Number.NaN, 3));
      assert.ok(Number.isNaN(dst[0]) && Number.isNaN(dst[1]), op);
      assert.equal(dst[2], op === 'min' ? 2 : 3);
    }
  });

  it('touches only the requested range of a kernel call', () => {
    for (const dtype of kDTypes) {
      const Ctor = constructorOf(dtype);
      const one = dtype.endsWith('64') && dtype !== 'float64' ? 1n : 1;
      const dst = new Ctor(8) as TypedArray;
      const src = new Ctor(8) as TypedArray;
      (src as { fill(v: unknown): void }).fill(one);
      selectKernel(dtype, 'sum')(dst, 2, src, 5, 3);
      assert.deepEqual(
        [...dst].map((v) => Number(v)),
        [0, 0, 1, 1, 1, 0, 0, 0],
        dtype,
      );
    }
  });

  it('refuses arrays of different dtypes or lengths', () => {
    assert.throws(() => reduceInto('sum', new Float32Array(2), new Float64Array(2)), InvalidArgumentError);
    assert.throws(() => reduceInto('sum', new Int32Array(2), new Int32Array(3)), InvalidArgumentError);
    assert.throws(
      () => reduceInto('sum', new Uint8ClampedArray(2) as never, new Uint8ClampedArray(2) as never),
      InvalidArgumentError,
    );
    assert.throws(() => selectKernel('float32', 'average' as never), InvalidArgumentError);
  });
});

describe('divideInPlace', () => {
  it('divides a range, rounding like a float division', () => {
    const f32 = Float32Array.of(1, 2, 3, 10);
    divideInPlace(f32, 3, 1, 2);
    assert.deepEqual([...f32], [1, Math.fround(2 / 3), 1, 10]);
    const f64 = Float64Array.of(1, 2);
    divideInPlace(f64, 4);
    assert.deepEqual([...f64], [0.25, 0.5]);
  });
});
