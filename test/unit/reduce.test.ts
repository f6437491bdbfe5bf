import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reduceInRankOrder } from '../../src/algorithms/rank_order_reduce.js';
import {
  checkReduceOp,
  divideInPlace,
  type ElementwiseOp,
  elementwiseOf,
  finishOf,
  isBitwise,
  reduceDType,
  reduceInto,
  reduceOpFits,
  scaleInPlace,
  selectKernel,
} from '../../src/algorithms/reduce.js';
import { constructorOf, isFloat, kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { type DType, kReduceOps, type TypedArray } from '../../src/core/types.js';
import { firstMismatch, opsFor, randomArray, referenceReduce, seeded } from './support/typed_data.js';

const kIntDTypes = kDTypes.filter((d) => !isFloat(d));
const kBitwiseOps = ['band', 'bor', 'bxor'] as const;

/** The kernel ops of a dtype: every op it supports but 'average', which is a sum plus a division. */
function kernelOpsFor(dtype: DType): ElementwiseOp[] {
  return opsFor(dtype).filter((op): op is ElementwiseOp => op !== 'average');
}

describe('reduceInto', () => {
  for (const dtype of kDTypes) {
    it(`${dtype}: every op matches the exact reference element by element`, () => {
      const random = seeded(dtype.length * 7919);
      for (const op of kernelOpsFor(dtype)) {
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
    assert.throws(() => selectKernel('float32', 'toString' as never), InvalidArgumentError);
  });
});

describe('bitwise kernels (band, bor, bxor)', () => {
  it('are offered for every integer dtype, and by opsFor, so every allreduce test covers them', () => {
    for (const dtype of kIntDTypes) {
      for (const op of kBitwiseOps) {
        assert.equal(typeof selectKernel(dtype, op), 'function', `${dtype} ${op}`);
        assert.ok(opsFor(dtype).includes(op), `opsFor(${dtype}) has ${op}`);
      }
    }
    for (const dtype of ['float32', 'float64'] as const) {
      for (const op of kBitwiseOps) assert.ok(!opsFor(dtype).includes(op), `opsFor(${dtype}) lacks ${op}`);
    }
  });

  it('work bit for bit on negative values of the signed dtypes', () => {
    const cases: [DType, number[], number[]][] = [
      ['int8', [-1, -128, -86, 0x55, -2], [-128, 127, 0x55, -1, -3]],
      ['int16', [-1, -32768, -21846, 0x5555, -2], [-32768, 32767, 0x5555, -1, -3]],
      ['int32', [-1, -2147483648, -1431655766, 0x55555555, -2], [-2147483648, 2147483647, 0x55555555, -1, -3]],
    ];
    for (const [dtype, a, b] of cases) {
      const Ctor = constructorOf(dtype) as unknown as { from(v: number[]): TypedArray };
      const bits = dtype === 'int8' ? 8 : dtype === 'int16' ? 16 : 32;
      const as = (x: number) => Number(BigInt.asIntN(bits, BigInt(x)));
      for (const op of kBitwiseOps) {
        const dst = Ctor.from(a);
        reduceInto(op, dst, Ctor.from(b));
        const expected = a.map((x, i) => {
          const y = b[i] as number;
          return as(op === 'band' ? x & y : op === 'bor' ? x | y : x ^ y);
        });
        assert.deepEqual([...dst], expected, `${dtype} ${op}`);
      }
    }
    const i8 = Int8Array.of(-1, -128, -86);
    reduceInto('bxor', i8, Int8Array.of(-128, 127, 0x55));
    assert.deepEqual([...i8], [127, -1, -1]);
  });

  it('keep the high bit of unsigned values (where a JavaScript & yields a negative int32)', () => {
    const u32 = Uint32Array.of(0xffffffff, 0x80000001, 0xdeadbeef);
    reduceInto('band', u32, Uint32Array.of(0x80000000, 0xffffffff, 0xffff0000));
    assert.deepEqual([...u32], [0x80000000, 0x80000001, 0xdead0000]);
    const or = Uint32Array.of(0x80000000, 0);
    reduceInto('bor', or, Uint32Array.of(0x7fffffff, 0xf0000000));
    assert.deepEqual([...or], [0xffffffff, 0xf0000000]);
    const u16 = Uint16Array.of(0xffff, 0x8000);
    reduceInto('bxor', u16, Uint16Array.of(0x00ff, 0x8001));
    assert.deepEqual([...u16], [0xff00, 1]);
    const u8 = Uint8Array.of(0xf0, 0xaa);
    reduceInto('bor', u8, Uint8Array.of(0x0f, 0x55));
    assert.deepEqual([...u8], [0xff, 0xff]);
  });

  it('are exact on 64-bit values beyond 2^53, negative ones included', () => {
    const big = 2n ** 62n + 2n ** 53n + 1n; // not a double: 2^53 + 1 rounds
    const i64 = BigInt64Array.of(big, -1n, -(2n ** 63n), -(2n ** 53n) - 1n);
    reduceInto('band', i64, BigInt64Array.of(2n ** 53n + 1n, -(2n ** 60n) - 3n, -1n, -2n));
    assert.deepEqual([...i64], [2n ** 53n + 1n, -(2n ** 60n) - 3n, -(2n ** 63n), -(2n ** 53n) - 2n]);
    const x64 = BigInt64Array.of(2n ** 63n - 1n, -1n);
    reduceInto('bxor', x64, BigInt64Array.of(-1n, 2n ** 53n + 1n));
    assert.deepEqual([...x64], [-(2n ** 63n), -(2n ** 53n) - 2n]);
    const u64 = BigUint64Array.of(2n ** 64n - 1n, 2n ** 63n, 2n ** 53n + 1n);
    reduceInto('bor', u64, BigUint64Array.of(0n, 2n ** 53n + 1n, 2n ** 60n));
    assert.deepEqual([...u64], [2n ** 64n - 1n, 2n ** 63n + 2n ** 53n + 1n, 2n ** 60n + 2n ** 53n + 1n]);
    const ux = BigUint64Array.of(2n ** 64n - 1n);
    reduceInto('bxor', ux, BigUint64Array.of(2n ** 63n + 2n ** 53n + 1n));
    assert.deepEqual([...ux], [2n ** 63n - 2n ** 53n - 2n]);
  });

  it('touch only the requested range of a kernel call', () => {
    for (const dtype of kIntDTypes) {
      const Ctor = constructorOf(dtype);
      const ones = dtype.endsWith('64') ? -1n : -1;
      for (const op of kBitwiseOps) {
        const dst = new Ctor(8) as TypedArray;
        const src = new Ctor(8) as TypedArray;
        (src as { fill(v: unknown): void }).fill(ones);
        selectKernel(dtype, op)(dst, 2, src, 5, 3);
        const set = [...dst].map((v) => (Number(v) === 0 ? 0 : 1));
        assert.deepEqual(set, op === 'band' ? [0, 0, 0, 0, 0, 0, 0, 0] : [0, 0, 1, 1, 1, 0, 0, 0], `${dtype} ${op}`);
      }
    }
  });

  it('are refused on float dtypes, naming the dtype and the op', () => {
    for (const dtype of ['float32', 'float64'] as const) {
      for (const op of kBitwiseOps) {
        const message = `op '${op}' needs an integer dtype, got ${dtype}`;
        const check = (e: unknown) => e instanceof InvalidArgumentError && e.message === message;
        assert.throws(() => selectKernel(dtype, op), check, `selectKernel ${dtype} ${op}`);
        const Ctor = constructorOf(dtype);
        assert.throws(() => reduceInto(op, new Ctor(2), new Ctor(2)), check, `reduceInto ${dtype} ${op}`);
        assert.throws(() => reduceDType(new Ctor(2), op), check, `reduceDType ${dtype} ${op}`);
      }
    }
  });
});

describe('op and dtype checks (reduceOpFits, checkReduceOp, reduceDType)', () => {
  it('average: floats only; bitwise: integers only; the rest: every dtype', () => {
    for (const dtype of kDTypes) {
      for (const op of kReduceOps) {
        const fits = op === 'average' ? isFloat(dtype) : isBitwise(op) ? !isFloat(dtype) : true;
        assert.equal(reduceOpFits(dtype, op), fits, `${dtype} ${op}`);
        assert.equal(opsFor(dtype).includes(op), fits, `opsFor(${dtype}) and reduceOpFits agree on ${op}`);
        if (fits) {
          assert.doesNotThrow(() => checkReduceOp(dtype, op));
          assert.equal(reduceDType(new (constructorOf(dtype))(1), op), dtype);
        } else assert.throws(() => checkReduceOp(dtype, op), InvalidArgumentError, `${dtype} ${op}`);
      }
    }
  });

  it('say why', () => {
    assert.throws(() => reduceDType(new Int32Array(1), 'average'), {
      name: 'InvalidArgumentError',
      message: "op 'average' needs a float dtype, got int32",
    });
    assert.throws(() => reduceDType(new BigUint64Array(1), 'average'), /op 'average' needs a float dtype, got uint64/);
    assert.throws(() => checkReduceOp('float64', 'bor'), /op 'bor' needs an integer dtype, got float64/);
    assert.throws(() => reduceDType(new Uint8ClampedArray(1) as never, 'sum'), InvalidArgumentError);
  });

  it('isBitwise names exactly band, bor and bxor', () => {
    assert.deepEqual(
      kReduceOps.filter((op) => isBitwise(op)),
      ['band', 'bor', 'bxor'],
    );
  });
});

describe('elementwiseOf and finishOf', () => {
  it("reduce 'average' as a sum, every other op as itself", () => {
    for (const op of kReduceOps) assert.equal(elementwiseOf(op), op === 'average' ? 'sum' : op);
  });

  it("finish only 'average', by a division by the rank count over the given range", () => {
    for (const op of kReduceOps) if (op !== 'average') assert.equal(finishOf(op, 4), undefined, op);
    const finish = finishOf('average', 3);
    assert.ok(finish);
    const f32 = Float32Array.of(3, 2, 6, 9);
    finish(f32, 1, 2);
    assert.deepEqual([...f32], [3, Math.fround(2 / 3), 2, 9]);
    const f64 = Float64Array.of(1, 2);
    finishOf('average', 4)?.(f64, 0, 2);
    assert.deepEqual([...f64], [0.25, 0.5]);
  });

  it('give reduceInRankOrder the reference result for every dtype and op', () => {
    const random = seeded(4242);
    for (const dtype of kDTypes) {
      for (const op of opsFor(dtype)) {
        const inputs = [0, 1, 2].map(() => randomArray(dtype, 19, random, op === 'product'));
        const into = new (constructorOf(dtype))(19) as TypedArray;
        reduceInRankOrder(inputs, into, op, selectKernel);
        // One rank-order fold: floats are as exact as the float64 reference rounded once, bar a few ulps.
        const tolerance = isFloat(dtype) && op !== 'min' && op !== 'max' ? 2 ** -20 : 0;
        assert.equal(firstMismatch(into, referenceReduce(dtype, op, inputs), tolerance), undefined, `${dtype} ${op}`);
      }
    }
    assert.throws(() => reduceInRankOrder([new Float32Array(1)], new Float32Array(1), 'bxor', selectKernel), /got float32/);
  });
});

describe('scaleInPlace', () => {
  it('multiplies a range, rounding like a float multiplication', () => {
    const f32 = Float32Array.of(1, 3, 5, 7);
    scaleInPlace(f32, 0.1, 1, 2);
    assert.deepEqual([...f32], [1, Math.fround(3 * 0.1), Math.fround(5 * 0.1), 7]);
    const f64 = Float64Array.of(1, -2, 3);
    scaleInPlace(f64, 0.5);
    assert.deepEqual([...f64], [0.5, -1, 1.5]);
    const tail = Float64Array.of(1, 2, 3);
    scaleInPlace(tail, 2, 1);
    assert.deepEqual([...tail], [1, 4, 6]);
  });

  it('writes nothing for a factor of 1', () => {
    const writes: number[] = [];
    const spy = (buf: Float32Array) =>
      new Proxy(buf, {
        // The typed array getters (length) need the array itself as receiver, not the proxy.
        get: (target, key) => Reflect.get(target, key, target),
        set(target, key, value) {
          writes.push(Number(key));
          return Reflect.set(target, key, value);
        },
      });
    scaleInPlace(spy(new Float32Array(5)), 1);
    assert.deepEqual(writes, []);
    scaleInPlace(spy(new Float32Array(5)), 2, 1, 3);
    assert.deepEqual(writes, [1, 2, 3], 'the spy does see the writes of another factor');
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
