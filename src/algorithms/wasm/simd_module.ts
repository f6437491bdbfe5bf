/**
 * The WebAssembly SIMD reduce module, emitted as bytes at load time (no toolchain needed: the
 * module is ~4 KiB of hand-assembled code, written down here in the binary format's terms).
 *
 * Every exported function is `(a: i32, b: i32, nbytes: i32)`: for each 16-byte vector in
 * [a, a + nbytes), a[..] = op(a[..], b[..]), unrolled four times, so nbytes must be a multiple
 * of 64. The module exports its memory ("mem", kPages pages); the caller copies operands in.
 * The fp16 kernels (half_kernels.ts) have the same signature.
 */

import { conversionBody, type HalfConversion, halfKernelBody, kHalfConversions, kHalfOps } from './half_kernels.js';
import { uleb } from './leb128.js';

/** One exported kernel: its name and its SIMD opcode (after the 0xfd prefix). */
export const kSimdOps = {
  f32_sum: 0xe4,
  f32_product: 0xe6,
  f32_min: 0xe8,
  f32_max: 0xe9,
  f64_sum: 0xf0,
  f64_product: 0xf2,
  f64_min: 0xf4,
  f64_max: 0xf5,
  i8_sum: 0x6e,
  i8_min_s: 0x76,
  i8_min_u: 0x77,
  i8_max_s: 0x78,
  i8_max_u: 0x79,
  i16_sum: 0x8e,
  i16_product: 0x95,
  i16_min_s: 0x96,
  i16_min_u: 0x97,
  i16_max_s: 0x98,
  i16_max_u: 0x99,
  i32_sum: 0xae,
  i32_product: 0xb5,
  i32_min_s: 0xb6,
  i32_min_u: 0xb7,
  i32_max_s: 0xb8,
  i32_max_u: 0xb9,
  i64_sum: 0xce,
  i64_product: 0xd5,
  // Bitwise ops ignore lane boundaries: one kernel serves every integer width.
  v128_band: 0x4e,
  v128_bor: 0x50,
  v128_bxor: 0x51,
} as const;
export type SimdKernelName = keyof typeof kSimdOps | keyof typeof kHalfOps;

/** Every kernel the module exports. */
export function isSimdKernel(name: string): name is SimdKernelName {
  return name in kSimdOps || name in kHalfOps;
}

/** Memory pages (64 KiB each): two operand areas of kPages / 2 pages. */
export const kPages = 2;

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

function name(text: string): number[] {
  return [...uleb(text.length), ...Array.from(text, (c) => c.charCodeAt(0))];
}

const kLocalGet = 0x20;
const kLocalSet = 0x21;
const kI32Const = 0x41;
const kI32Add = 0x6a;
const kI32GeU = 0x4f;
const kSimd = 0xfd;
const kV128Load = 0x00;
const kV128Store = 0x0b;

/** The body of one kernel: locals a=0, b=1, n=2, end=3. */
function kernelBody(opcode: number): number[] {
  const body = [1, 1, 0x7f]; // one local of type i32: end
  body.push(kLocalGet, 0, kLocalGet, 2, kI32Add, kLocalSet, 3); // end = a + n
  body.push(0x02, 0x40, 0x03, 0x40); // block, loop
  body.push(kLocalGet, 0, kLocalGet, 3, kI32GeU, 0x0d, 1); // if a >= end: break
  for (let k = 0; k < 4; k++) {
    const offset = uleb(16 * k);
    body.push(kLocalGet, 0); // address of the store
    body.push(kLocalGet, 0, kSimd, kV128Load, 4, ...offset);
    body.push(kLocalGet, 1, kSimd, kV128Load, 4, ...offset);
    body.push(kSimd, ...uleb(opcode));
    body.push(kSimd, kV128Store, 4, ...offset);
  }
  body.push(kLocalGet, 0, kI32Const, 0xc0, 0x00, kI32Add, kLocalSet, 0); // a += 64
  body.push(kLocalGet, 1, kI32Const, 0xc0, 0x00, kI32Add, kLocalSet, 1); // b += 64
  body.push(0x0c, 0, 0x0b, 0x0b, 0x0b); // continue; end loop; end block; end function
  return [...uleb(body.length), ...body];
}

export function simdModuleBytes(): Uint8Array {
  const names = [...Object.keys(kSimdOps), ...Object.keys(kHalfOps), ...kHalfConversions] as (SimdKernelName | HalfConversion)[];
  const types = section(1, [1, 0x60, 3, 0x7f, 0x7f, 0x7f, 0]); // (i32, i32, i32) -> ()
  const functions = section(3, [...uleb(names.length), ...names.map(() => 0)]);
  const memory = section(5, [1, 0, kPages]); // one memory, min kPages
  const exports = section(7, [
    ...uleb(names.length + 1),
    ...names.flatMap((n, i) => [...name(n), 0, ...uleb(i)]),
    ...name('mem'),
    2,
    0,
  ]);
  const body = (n: SimdKernelName | HalfConversion) => {
    if (n in kHalfOps) return halfKernelBody(kHalfOps[n as keyof typeof kHalfOps]);
    if (n in kSimdOps) return kernelBody(kSimdOps[n as keyof typeof kSimdOps]);
    return conversionBody(n as HalfConversion);
  };
  const code = section(10, [...uleb(names.length), ...names.flatMap(body)]);
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0, ...types, ...functions, ...memory, ...exports, ...code]);
}
