/**
 * The primitives of the control messages' binary encoding: a growing writer and a bounds-checked
 * reader. Numbers are little-endian; strings are a u32 byte length and UTF-8; dimensions are f64
 * so any safe integer fits. The reader checks every length against the bytes it has and throws
 * ProtocolError on anything malformed: a peer can never make it read out of bounds or allocate
 * without limit.
 */
import { ProtocolError } from '../../core/errors.js';

/** A reused writer keeps a buffer up to this size (a ready report with the largest eager payload fits). */
const kKeptBytes = 2 * 1024 * 1024;

export class Writer {
  private bytes = new Uint8Array(256);
  private view = new DataView(this.bytes.buffer);
  private offset = 0;
  private static readonly encoder = new TextEncoder();

  private reserve(n: number): void {
    if (this.offset + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.offset + n));
    grown.set(this.bytes.subarray(0, this.offset));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }
  u8(v: number): void {
    this.reserve(1);
    this.view.setUint8(this.offset, v);
    this.offset += 1;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.offset, v, true);
    this.offset += 4;
  }
  i32(v: number): void {
    this.reserve(4);
    this.view.setInt32(this.offset, v, true);
    this.offset += 4;
  }
  f64(v: number): void {
    this.reserve(8);
    this.view.setFloat64(this.offset, v, true);
    this.offset += 8;
  }
  str(s: string): void {
    const encoded = Writer.encoder.encode(s);
    this.u32(encoded.length);
    this.reserve(encoded.length);
    this.bytes.set(encoded, this.offset);
    this.offset += encoded.length;
  }
  bytesOf(b: Uint8Array): void {
    this.u32(b.length);
    this.reserve(b.length);
    this.bytes.set(b, this.offset);
    this.offset += b.length;
  }
  /** A u32 byte length and the bit-vector of `ids` (non-negative integers): bit i of byte i >> 3 is id i. */
  bitVector(ids: readonly number[]): void {
    let max = -1;
    for (const id of ids) if (id > max) max = id;
    const length = (max + 8) >> 3;
    this.u32(length);
    this.reserve(length);
    const at = this.offset;
    this.bytes.fill(0, at, at + length);
    for (const id of ids) this.bytes[at + (id >> 3)] = (this.bytes[at + (id >> 3)] as number) | (1 << (id & 7));
    this.offset += length;
  }
  /** Starts over, keeping the buffer unless a large message grew it. */
  reset(): void {
    this.offset = 0;
    if (this.bytes.length > kKeptBytes) {
      this.bytes = new Uint8Array(256);
      this.view = new DataView(this.bytes.buffer);
    }
  }
  /** The bytes written so far, copied out (into `alloc`'s array of that length, when given). */
  finish(alloc?: (length: number) => Uint8Array): Uint8Array {
    if (alloc === undefined) return this.bytes.slice(0, this.offset);
    const out = alloc(this.offset);
    out.set(this.bytes.subarray(0, this.offset));
    return out;
  }
}

/** Reads the one f64 the reader meets at a time (a DataView per message would be allocated per message). */
const kF64 = new DataView(new ArrayBuffer(8));

export class Reader {
  private offset = 0;
  private static readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly bytes: Uint8Array) {}
  private need(n: number, what: string, suffix = ''): void {
    if (this.offset + n > this.bytes.length) {
      throw new ProtocolError(`control message truncated while reading ${what}${suffix} at byte ${this.offset}`);
    }
  }
  u8(what: string): number {
    this.need(1, what);
    return this.bytes[this.offset++] as number;
  }
  u32(what: string, suffix = ''): number {
    this.need(4, what, suffix);
    const b = this.bytes;
    const o = this.offset;
    this.offset += 4;
    return ((b[o] as number) | ((b[o + 1] as number) << 8) | ((b[o + 2] as number) << 16) | ((b[o + 3] as number) << 24)) >>> 0;
  }
  i32(what: string): number {
    return this.u32(what) | 0;
  }
  f64(what: string): number {
    this.need(8, what);
    for (let i = 0; i < 8; i++) kF64.setUint8(i, this.bytes[this.offset + i] as number);
    this.offset += 8;
    return kF64.getFloat64(0, true);
  }
  str(what: string): string {
    const n = this.u32(what, ' length');
    this.need(n, what);
    const s = this.offset;
    this.offset += n;
    const text = this.bytes.subarray(s, s + n);
    try {
      // A browser's TextDecoder refuses views of shared memory: those are copied first.
      return Reader.decoder.decode(text.buffer instanceof ArrayBuffer ? text : text.slice());
    } catch {
      throw new ProtocolError(`control message has invalid UTF-8 in ${what}`);
    }
  }
  bytesOf(what: string): Uint8Array {
    const n = this.u32(what, ' length');
    this.need(n, what);
    const s = this.offset;
    this.offset += n;
    return this.bytes.subarray(s, s + n);
  }
  /** A count of items that each take at least `minBytes`: bounded by what is left. */
  count(what: string, minBytes: number): number {
    const n = this.u32(what);
    if (n * minBytes > this.bytes.length - this.offset) {
      throw new ProtocolError(`control message claims ${n} ${what}, more than its bytes hold`);
    }
    return n;
  }
  enumOf<T>(table: readonly T[], what: string): T {
    const code = this.u8(what);
    const value = table[code];
    if (value === undefined) throw new ProtocolError(`control message has unknown ${what} code ${code}`);
    return value;
  }
  dim(what: string): number {
    const v = this.f64(what);
    if (!Number.isSafeInteger(v) || v < 0) throw new ProtocolError(`control message has invalid ${what} ${v}`);
    return v;
  }
  /** Rejects a value the bytes hold but the protocol forbids. */
  fail(what: string): never {
    throw new ProtocolError(`control message has ${what}`);
  }
  end(): void {
    if (this.offset !== this.bytes.length) {
      throw new ProtocolError(`control message has ${this.bytes.length - this.offset} trailing bytes`);
    }
  }
}

/** The wire code of `value` in `table` (its index). */
export function codeOf<T>(table: readonly T[], value: T): number {
  return table.indexOf(value);
}

/** A shape: its number of dimensions, then each as f64. */
export function writeShape(w: Writer, shape: readonly number[]): void {
  w.u8(shape.length);
  for (const d of shape) w.f64(d);
}

const kMaxDims = 64;

export function readShape(r: Reader, what: string): number[] {
  const ndim = r.u8(`rank of ${what}`);
  if (ndim > kMaxDims) throw new ProtocolError(`control message has a ${what} of ${ndim} dimensions`);
  const shape: number[] = [];
  for (let i = 0; i < ndim; i++) shape.push(r.dim('dimension'));
  return shape;
}

/** A list of non-negative integers (per-rank counts, splits): a u32 length, then each as f64. */
export function writeCounts(w: Writer, counts: readonly number[]): void {
  w.u32(counts.length);
  for (const c of counts) w.f64(c);
}

export function readCounts(r: Reader, what: string): number[] {
  const n = r.count(what, 8);
  const counts: number[] = [];
  for (let i = 0; i < n; i++) counts.push(r.dim(what));
  return counts;
}

/** Option 'out''s length in elements, when the caller passed one: f64, -1 for none. */
export function writeOutLength(w: Writer, outLength: number | undefined): void {
  w.f64(outLength ?? -1);
}

/** The request with the out length read after its other fields, when there is one. */
export function withOutLength<R extends object>(r: Reader, request: R): R & { outLength?: number } {
  const outLength = r.f64('out length');
  if (outLength === -1) return request;
  if (!Number.isSafeInteger(outLength) || outLength < 0) r.fail(`an out length of ${outLength}`);
  return { ...request, outLength };
}
