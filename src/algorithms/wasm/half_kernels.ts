/**
 * WebAssembly SIMD reduce kernels for fp16 compression's wire dtype, in the module of
 * simd_module.ts: for each 16 bytes (8 halves) of a and b, both are widened to i32x4 pairs,
 * decoded to float32, combined with the f32x4 op, re-encoded to fp16 rounding to nearest even,
 * and narrowed back. The same results as the JavaScript kernels of reduce_half.ts, bit for bit
 * but for NaN payloads:
 *
 * - decode: (h & 0x7fff) << 13 rebased by (127 - 15) << 23; Infinity and NaN get the exponent's
 *   remaining (128 - 16) << 23; subnormals are built as 2^-14 · (1 + m/1024) and 2^-14 taken
 *   away again, which is exact.
 * - encode: normal results round by adding 0xfff plus the lowest kept bit (a carry runs into the
 *   exponent and from 65520 into Infinity); results below 2^-14 are added to 0.5 in float32, whose
 *   last place is 2^-24, so the IEEE addition does the ties-to-even rounding of the subnormal;
 *   from 65536 up it is Infinity, or a quiet NaN keeping the top payload bits.
 */
import { sleb, uleb } from './leb128.js';

const kLocalGet = 0x20;
const kLocalSet = 0x21;
const kI32Const = 0x41;
const kI32Add = 0x6a;
const kI32GeU = 0x4f;
const kSimd = 0xfd;

/** SIMD opcodes (after the 0xfd prefix) the kernels use. */
const k = {
  load: 0x00,
  store: 0x0b,
  const: 0x0c,
  and: 0x4e,
  or: 0x50,
  bitselect: 0x52,
  i32x4Eq: 0x37,
  i32x4GeS: 0x3f,
  i32x4GtS: 0x3b,
  narrowU: 0x86,
  extendLowU: 0xa9,
  extendHighU: 0xaa,
  shl: 0xab,
  shrU: 0xad,
  add: 0xae,
  sub: 0xb1,
  f32x4Add: 0xe4,
  f32x4Sub: 0xe5,
} as const;

/** The conversions the module exports besides the kernels (same signature; see conversionBody). */
export const kHalfConversions = ['f32_to_f16', 'f16_to_f32'] as const;
export type HalfConversion = (typeof kHalfConversions)[number];

/** The kernels: name and the f32x4 opcode that combines the decoded operands. */
export const kHalfOps = {
  f16_sum: 0xe4,
  f16_product: 0xe6,
  f16_min: 0xe8,
  f16_max: 0xe9,
} as const;

const simd = (op: number): number[] => [kSimd, ...uleb(op)];
/** v128.const of one i32 in every lane. */
function splat(value: number): number[] {
  const bytes = [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];
  return [...simd(k.const), ...bytes, ...bytes, ...bytes, ...bytes];
}
const get = (local: number) => [kLocalGet, ...uleb(local)];
const set = (local: number) => [kLocalSet, ...uleb(local)];
const shift = (op: number, bits: number) => [kI32Const, ...sleb(bits), ...simd(op)];

// Locals: a=0, b=1, n=2 (parameters), end=3 (i32); v128 scratch from 4.
const kX = 4; // the value being decoded or encoded
const kT = 5;
const kU = 6;
const kLo = 7; // decoded low lanes of a, then the result
const kHi = 8;
const kBLo = 9;
const kBHi = 10;

/** local `into` = float32 bits of the halves (one per i32 lane) in local `from`. */
function decode(from: number, into: number): number[] {
  return [
    // t = (h & 0x7fff) << 13; u = t & 0x0f800000 (the exponent)
    ...get(from),
    ...splat(0x7fff),
    ...simd(k.and),
    ...shift(k.shl, 13),
    ...set(kT),
    ...get(kT),
    ...splat(0x0f800000),
    ...simd(k.and),
    ...set(kU),
    // t += 0x38000000, and another 0x38000000 where the exponent is all ones (Infinity, NaN)
    ...get(kT),
    ...splat(0x38000000),
    ...simd(k.add),
    ...get(kU),
    ...splat(0x0f800000),
    ...simd(k.i32x4Eq),
    ...splat(0x38000000),
    ...simd(k.and),
    ...simd(k.add),
    ...set(kT),
    // where the exponent is zero: float(t + 1 << 23) - 2^-14
    ...get(kT),
    ...splat(0x00800000),
    ...simd(k.add),
    ...splat(0x38800000),
    ...simd(k.f32x4Sub),
    ...get(kT),
    ...get(kU),
    ...splat(0),
    ...simd(k.i32x4Eq),
    ...simd(k.bitselect),
    // | the sign
    ...get(from),
    ...splat(0x8000),
    ...simd(k.and),
    ...shift(k.shl, 16),
    ...simd(k.or),
    ...set(into),
  ];
}

/** local `into` = the halves (one per i32 lane) nearest to the float32 bits in local `from`. */
function encode(from: number, into: number): number[] {
  return [
    // u = abs
    ...get(from),
    ...splat(0x7fffffff),
    ...simd(k.and),
    ...set(kU),
    // t = m = abs - 0x38000000; normal = (m + 0xfff + ((m >>> 13) & 1)) >>> 13
    ...get(kU),
    ...splat(0x38000000),
    ...simd(k.sub),
    ...set(kT),
    ...get(kT),
    ...splat(0xfff),
    ...simd(k.add),
    ...get(kT),
    ...shift(k.shrU, 13),
    ...splat(1),
    ...simd(k.and),
    ...simd(k.add),
    ...shift(k.shrU, 13),
    // subnormal = bits(float(abs) + 0.5) - 0x3f000000
    ...get(kU),
    ...splat(0x3f000000),
    ...simd(k.f32x4Add),
    ...splat(0x3f000000),
    ...simd(k.sub),
    // the normal one from 2^-14 up
    ...get(kU),
    ...splat(0x38800000),
    ...simd(k.i32x4GeS),
    ...simd(k.bitselect),
    ...set(kT),
    // from 65536 up: Infinity, or a quiet NaN with the top payload bits
    ...splat(0x7e00),
    ...get(kU),
    ...shift(k.shrU, 13),
    ...splat(0x3ff),
    ...simd(k.and),
    ...simd(k.or),
    ...splat(0x7c00),
    ...get(kU),
    ...splat(0x7f800000),
    ...simd(k.i32x4GtS),
    ...simd(k.bitselect),
    ...get(kT),
    ...get(kU),
    ...splat(0x47800000),
    ...simd(k.i32x4GeS),
    ...simd(k.bitselect),
    // | the sign
    ...get(from),
    ...shift(k.shrU, 16),
    ...splat(0x8000),
    ...simd(k.and),
    ...simd(k.or),
    ...set(into),
  ];
}

/** The body of the kernel combining with f32x4 opcode `opcode` (locals a=0, b=1, n=2). */
export function halfKernelBody(opcode: number): number[] {
  const body = [2, 1, 0x7f, 7, 0x7b]; // locals: one i32 (end), seven v128
  body.push(kLocalGet, 0, kLocalGet, 2, kI32Add, kLocalSet, 3); // end = a + n
  body.push(0x02, 0x40, 0x03, 0x40); // block, loop
  body.push(kLocalGet, 0, kLocalGet, 3, kI32GeU, 0x0d, 1); // if a >= end: break
  for (const [operand, lo, hi] of [
    [0, kLo, kHi],
    [1, kBLo, kBHi],
  ] as const) {
    body.push(...get(operand), ...simd(k.load), 4, 0, ...simd(k.extendLowU), ...set(kX), ...decode(kX, lo));
    body.push(...get(operand), ...simd(k.load), 4, 0, ...simd(k.extendHighU), ...set(kX), ...decode(kX, hi));
  }
  body.push(...get(kLo), ...get(kBLo), ...simd(opcode), ...set(kX), ...encode(kX, kLo));
  body.push(...get(kHi), ...get(kBHi), ...simd(opcode), ...set(kX), ...encode(kX, kHi));
  body.push(...get(0), ...get(kLo), ...get(kHi), ...simd(k.narrowU), ...simd(k.store), 4, 0);
  body.push(kLocalGet, 0, kI32Const, 0x10, kI32Add, kLocalSet, 0); // a += 16
  body.push(kLocalGet, 1, kI32Const, 0x10, kI32Add, kLocalSet, 1); // b += 16
  body.push(0x0c, 0, 0x0b, 0x0b, 0x0b); // continue; end loop; end block; end function
  return [...uleb(body.length), ...body];
}

/**
 * The body of a conversion `(src, dst, n)`: f32_to_f16 writes n bytes of halves (a multiple of
 * 16) at dst from 2n bytes of float32 at src; f16_to_f32 reads n bytes of halves at src and
 * writes 2n bytes of float32 at dst.
 */
export function conversionBody(which: HalfConversion): number[] {
  const body = [2, 1, 0x7f, 7, 0x7b]; // the kernels' locals
  // end = the end of the halves: dst + n when encoding, src + n when decoding
  body.push(kLocalGet, which === 'f32_to_f16' ? 1 : 0, kLocalGet, 2, kI32Add, kLocalSet, 3);
  body.push(0x02, 0x40, 0x03, 0x40); // block, loop
  body.push(kLocalGet, which === 'f32_to_f16' ? 1 : 0, kLocalGet, 3, kI32GeU, 0x0d, 1); // if done: break
  if (which === 'f32_to_f16') {
    body.push(...get(0), ...simd(k.load), 4, 0, ...set(kX), ...encode(kX, kLo));
    body.push(...get(0), ...simd(k.load), 4, 16, ...set(kX), ...encode(kX, kHi));
    body.push(...get(1), ...get(kLo), ...get(kHi), ...simd(k.narrowU), ...simd(k.store), 4, 0);
    body.push(kLocalGet, 0, kI32Const, 0x20, kI32Add, kLocalSet, 0); // src += 32
    body.push(kLocalGet, 1, kI32Const, 0x10, kI32Add, kLocalSet, 1); // dst += 16
  } else {
    body.push(...get(0), ...simd(k.load), 4, 0, ...simd(k.extendLowU), ...set(kX), ...decode(kX, kLo));
    body.push(...get(0), ...simd(k.load), 4, 0, ...simd(k.extendHighU), ...set(kX), ...decode(kX, kHi));
    body.push(...get(1), ...get(kLo), ...simd(k.store), 4, 0);
    body.push(...get(1), ...get(kHi), ...simd(k.store), 4, 16);
    body.push(kLocalGet, 0, kI32Const, 0x10, kI32Add, kLocalSet, 0); // src += 16
    body.push(kLocalGet, 1, kI32Const, 0x20, kI32Add, kLocalSet, 1); // dst += 32
  }
  body.push(0x0c, 0, 0x0b, 0x0b, 0x0b); // continue; end loop; end block; end function
  return [...uleb(body.length), ...body];
}
