import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createHalfConverter } from '../../src/algorithms/half_convert.js';
import { divideInPlace, scaleInPlace, selectKernel } from '../../src/algorithms/reduce.js';
import { allocShared, asDType, dtypeOf, reduceIdentity } from '../../src/core/dtypes.js';
import {
  decodeHalves,
  encodeHalves,
  Float16Bits,
  floatFromHalf,
  halfFromFloat,
  halfFromFloatBits,
  kHalfToFloat,
} from '../../src/core/float16.js';

/** The fp16 bits of `value`, by exact arithmetic on doubles (round to nearest, ties to even): the reference. */
function referenceHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const abs = Math.abs(value);
  if (abs >= 65520) return sign | 0x7c00;
  // Scale into units of the result's last place, then round half to even.
  const exponent = abs < 2 ** -14 ? -14 : Math.floor(Math.log2(abs));
  const ulp = 2 ** (Math.max(exponent, -14) - 10);
  const units = abs / ulp;
  let q = Math.floor(units);
  const rest = units - q;
  if (rest > 0.5 || (rest === 0.5 && q % 2 === 1)) q++;
  const rounded = q * ulp;
  if (rounded === 0) return sign;
  // Encode the rounded value (exact in fp16) field by field.
  if (rounded < 2 ** -14) return sign | (rounded / 2 ** -24);
  const e = Math.floor(Math.log2(rounded));
  const fraction = rounded / 2 ** e - 1;
  return sign | ((e + 15) << 10) | Math.round(fraction * 1024);
}

const f32 = (x: number) => Math.fround(x);

describe('float16 conversion', () => {
  it('round-trips every one of the 65536 halves (NaNs stay NaN, with their sign)', () => {
    for (let h = 0; h < 65536; h++) {
      const value = floatFromHalf(h);
      const back = halfFromFloat(value);
      if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) {
        assert.ok(Number.isNaN(value), `half ${h.toString(16)} decodes to NaN`);
        assert.equal(back & 0x7c00, 0x7c00, `half ${h.toString(16)}`);
        assert.notEqual(back & 0x3ff, 0, `half ${h.toString(16)} stays a NaN`);
        assert.equal(back & 0x8000, h & 0x8000, `half ${h.toString(16)} keeps its sign`);
      } else {
        assert.equal(back, h, `half ${h.toString(16)} = ${value}`);
      }
    }
  });

  it('decodes exactly: normals, subnormals, zeros, infinities', () => {
    assert.equal(floatFromHalf(0x3c00), 1);
    assert.equal(floatFromHalf(0xc000), -2);
    assert.equal(floatFromHalf(0x7bff), 65504);
    assert.equal(floatFromHalf(0x0001), 2 ** -24);
    assert.equal(floatFromHalf(0x03ff), 1023 * 2 ** -24);
    assert.equal(floatFromHalf(0x0400), 2 ** -14);
    assert.ok(Object.is(floatFromHalf(0x8000), -0));
    assert.equal(floatFromHalf(0x7c00), Number.POSITIVE_INFINITY);
    assert.equal(floatFromHalf(0xfc00), Number.NEGATIVE_INFINITY);
  });

  it('rounds to nearest, ties to even', () => {
    assert.equal(halfFromFloat(1 + 2 ** -11), 0x3c00, '1 + 2^-11 is a tie: to the even 1');
    assert.equal(halfFromFloat(1 + 3 * 2 ** -11), 0x3c02, '1 + 3·2^-11 is a tie: to the even 1 + 2^-9');
    assert.equal(halfFromFloat(f32(1 + 2 ** -11 + 2 ** -20)), 0x3c01, 'just above the tie: up');
    assert.equal(halfFromFloat(f32(1 + 2 ** -11 - 2 ** -20)), 0x3c00, 'just below the tie: down');
    assert.equal(halfFromFloat(-(1 + 3 * 2 ** -11)), 0xbc02, 'signs round by magnitude');
    assert.equal(halfFromFloat(2047 + 0.5), halfFromFloat(2048), 'ties at the carry into the exponent');
  });

  it('saturates to Infinity from 65520 and keeps 65504 finite', () => {
    assert.equal(halfFromFloat(65504), 0x7bff);
    assert.equal(halfFromFloat(65519), 0x7bff);
    assert.equal(halfFromFloat(65520), 0x7c00);
    assert.equal(halfFromFloat(-65520), 0xfc00);
    assert.equal(halfFromFloat(1e10), 0x7c00);
    assert.equal(halfFromFloat(Number.POSITIVE_INFINITY), 0x7c00);
    assert.equal(halfFromFloat(Number.NEGATIVE_INFINITY), 0xfc00);
  });

  it('handles subnormals: 2^-24 is the smallest, half of it and below flush to signed zero', () => {
    assert.equal(halfFromFloat(2 ** -24), 0x0001);
    assert.equal(halfFromFloat(-(2 ** -24)), 0x8001);
    assert.equal(halfFromFloat(2 ** -25), 0x0000, '2^-25 is a tie: to the even 0');
    assert.equal(halfFromFloat(f32(2 ** -25 * (1 + 2 ** -20))), 0x0001, 'just above half of 2^-24: up');
    assert.equal(halfFromFloat(2 ** -26), 0x0000);
    assert.equal(halfFromFloat(-(2 ** -26)), 0x8000);
    assert.equal(halfFromFloat(1.5 * 2 ** -24), 0x0002, '1.5·2^-24 is a tie: to the even 2');
    assert.equal(halfFromFloat(2.5 * 2 ** -24), 0x0002, '2.5·2^-24 is a tie: to the even 2');
    assert.equal(halfFromFloat(2 ** -14 - 2 ** -25), 0x0400, 'the largest subnormal tie carries into the smallest normal');
    assert.equal(halfFromFloat(1e-45), 0x0000, 'float32 subnormals are zero');
    assert.ok(Object.is(floatFromHalf(halfFromFloat(-0)), -0));
  });

  it('keeps NaN a NaN', () => {
    assert.ok(Number.isNaN(floatFromHalf(halfFromFloat(Number.NaN))));
    assert.equal(halfFromFloatBits(0xffc00000) & 0xfe00, 0xfe00, 'a negative quiet NaN');
    assert.notEqual(halfFromFloatBits(0x7f800001) & 0x3ff, 0, 'a NaN whose payload is in the bits fp16 drops');
  });

  it('matches exact rounding on a sweep of float32 values', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const bits = new Uint32Array(1);
    const f = new Float32Array(bits.buffer);
    // Every exponent of float32 with random significands, both signs.
    for (let i = 0; i < 200_000; i++) {
      bits[0] = Math.floor(random() * 2 ** 32);
      const value = f[0] as number;
      if (Number.isNaN(value)) continue;
      assert.equal(
        halfFromFloatBits(bits[0] as number),
        referenceHalf(value),
        `float32 bits ${bits[0]?.toString(16)} = ${value}`,
      );
    }
  });

  it('converts arrays both ways', () => {
    const values = new Float32Array([0, 1, -2.5, 65504, 1e6, 2 ** -24, 0.1]);
    const halves = new Float16Bits(values.length);
    encodeHalves(values, halves);
    const back = new Float32Array(values.length);
    decodeHalves(halves, back);
    assert.deepEqual([...back], [0, 1, -2.5, 65504, Number.POSITIVE_INFINITY, 2 ** -24, kHalfToFloat[halfFromFloat(0.1)]]);
  });
});

describe('float16 wire dtype', () => {
  it('is told from uint16 by class, also after a structured clone', () => {
    const halves = allocShared('float16', 4);
    assert.equal(dtypeOf(halves), 'float16');
    assert.equal(dtypeOf(halves.subarray(1)), 'float16');
    const cloned = structuredClone(halves);
    assert.equal(dtypeOf(cloned), 'uint16');
    const viewed = asDType('float16', cloned);
    assert.equal(dtypeOf(viewed), 'float16');
    assert.equal(viewed.buffer, cloned.buffer);
  });

  it('has identities as bits', () => {
    assert.equal(reduceIdentity('product', 'float16'), 0x3c00);
    assert.equal(reduceIdentity('min', 'float16'), 0x7c00);
    assert.equal(reduceIdentity('max', 'float16'), 0xfc00);
    assert.equal(reduceIdentity('sum', 'float16'), 0);
  });
});

describe('float16 kernels: decoded, computed in float32, re-encoded', () => {
  const halvesOf = (values: number[]) => Float16Bits.from(values.map(halfFromFloat)) as Float16Bits;
  const valuesOf = (halves: Uint16Array) => [...halves].map(floatFromHalf);

  it('sum, product, min, max', () => {
    const a = [1, 2.5, -3, 60000, 0.5, Number.NaN];
    const b = [2, 0.25, 4, 10000, -0.5, 1];
    const expect = {
      sum: [3, 2.75, 1, Number.POSITIVE_INFINITY, 0, Number.NaN],
      product: [2, 0.625, -12, Number.POSITIVE_INFINITY, -0.25, Number.NaN],
      min: [1, 0.25, -3, 10000, -0.5, Number.NaN],
      max: [2, 2.5, 4, 60000, 0.5, Number.NaN],
    } as const;
    for (const op of ['sum', 'product', 'min', 'max'] as const) {
      const dst = halvesOf(a);
      selectKernel('float16', op)(dst, 0, halvesOf(b), 0, a.length);
      assert.deepEqual(valuesOf(dst), expect[op], op);
    }
  });

  it('rounds each step once, to nearest even, from the float32 result', () => {
    // 2048 + 1 is a tie between 2048 and 2050 in fp16: to the even 2048; 2048 + 3 → 2052.
    const dst = halvesOf([2048, 2048, 1]);
    selectKernel('float16', 'sum')(dst, 0, halvesOf([1, 3, 2 ** -11]), 0, 3);
    assert.deepEqual(valuesOf(dst), [2048, 2052, 1]);
  });

  it('respects offsets and lengths', () => {
    const dst = halvesOf([1, 1, 1, 1]);
    selectKernel('float16', 'sum')(dst, 1, halvesOf([5, 6, 7]), 1, 2);
    assert.deepEqual(valuesOf(dst), [1, 7, 8, 1]);
  });

  it('averages and scales in float32', () => {
    const buf = halvesOf([3, 10, 1]);
    divideInPlace(buf, 4);
    assert.deepEqual(valuesOf(buf), [0.75, 2.5, 0.25]);
    scaleInPlace(buf, 2, 1, 1);
    assert.deepEqual(valuesOf(buf), [0.75, 5, 0.25]);
  });

  it('refuses bitwise ops', () => {
    assert.throws(() => selectKernel('float16', 'band'), /needs an integer dtype/);
  });
});

describe('the SIMD converter (createHalfConverter)', () => {
  const simd = createHalfConverter();
  const isNaNHalf = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;

  it('decodes every half as the table does, at lengths that are not whole vectors or chunks', () => {
    for (const length of [65536, 65536 - 3, 600, 17]) {
      const halves = Uint16Array.from({ length }, (_, i) => (i * 7919) & 0xffff);
      const js = new Float32Array(length);
      const wasm = new Float32Array(length);
      decodeHalves(halves, js);
      simd.decode(halves, wasm);
      for (let i = 0; i < length; i++)
        assert.ok(Object.is(js[i], wasm[i]), `half ${halves[i]?.toString(16)}: ${wasm[i]} not ${js[i]}`);
    }
  });

  it('encodes as halfFromFloatBits does: every half, and random float32 bits of every exponent', () => {
    const length = 200_003;
    // The float32 of every half first (each must come back exactly), then random bits.
    const bits = new Uint32Array(length);
    bits.set(new Uint32Array(kHalfToFloat.buffer));
    let seed = 99;
    for (let i = 65536; i < length; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      bits[i] = Math.floor((seed / 2 ** 31) * 2 ** 32);
    }
    const values = new Float32Array(bits.buffer);
    const js = new Uint16Array(length);
    const wasm = new Uint16Array(length);
    encodeHalves(values, js);
    simd.encode(values, wasm);
    for (let i = 0; i < length; i++) {
      const [x, y] = [js[i] as number, wasm[i] as number];
      if (x !== y && !(isNaNHalf(x) && isNaNHalf(y)))
        assert.fail(`float32 bits ${bits[i]?.toString(16)}: ${y.toString(16)} not ${x.toString(16)}`);
    }
  });
});
