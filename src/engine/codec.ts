/**
 * Binary codec of the control messages (see messages.ts).
 *
 * Layout: one byte of message type, then the body. A response starts with its kind (0 execute,
 * 1 error, 2 a list of u32 cache ids); a ready report is its round and a bit-vector of cache ids
 * (bit i of byte i >> 3 is id i), so a hundred ready tensors cost 13 bytes, then the eager
 * buffers (id and bytes). Strings are a u32 byte length and UTF-8;
 * numbers are little-endian; dimensions are f64 so any safe integer fits. The decoder checks
 * every length against the bytes it has and throws ProtocolError on anything malformed: a peer
 * can never make it read out of bounds or allocate without limit.
 */

import { kDTypes } from '../core/dtypes.js';
import { type ErrorClassName, ProtocolError } from '../core/errors.js';
import { type CollectiveOp, type DType, kReduceOps } from '../core/types.js';
import type { ControlMessage, Request, WireResponse } from './messages.js';

const kTypes = ['requests', 'responses', 'ready', 'shutdown', 'shutdown-ack'] as const;
const kOps: readonly CollectiveOp[] = ['allreduce', 'allgather', 'broadcast', 'barrier'];
const kErrorKinds: readonly ErrorClassName[] = [
  'RingReduceError',
  'InvalidArgumentError',
  'MismatchError',
  'PeerFailureError',
  'TimeoutError',
  'ShutdownError',
  'ProtocolError',
];
const kMaxDims = 64;

class Writer {
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
  finish(): Uint8Array {
    return this.bytes.slice(0, this.offset);
  }
}

class Reader {
  private readonly view: DataView;
  private offset = 0;
  private static readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  private need(n: number, what: string): void {
    if (this.offset + n > this.bytes.length) {
      throw new ProtocolError(`control message truncated while reading ${what} at byte ${this.offset}`);
    }
  }
  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.offset++);
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return v;
  }
  i32(what: string): number {
    this.need(4, what);
    const v = this.view.getInt32(this.offset, true);
    this.offset += 4;
    return v;
  }
  f64(what: string): number {
    this.need(8, what);
    const v = this.view.getFloat64(this.offset, true);
    this.offset += 8;
    return v;
  }
  str(what: string): string {
    const n = this.u32(`${what} length`);
    this.need(n, what);
    const s = this.offset;
    this.offset += n;
    try {
      return Reader.decoder.decode(this.bytes.subarray(s, s + n));
    } catch {
      throw new ProtocolError(`control message has invalid UTF-8 in ${what}`);
    }
  }
  bytesOf(what: string): Uint8Array {
    const n = this.u32(`${what} length`);
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
  end(): void {
    if (this.offset !== this.bytes.length) {
      throw new ProtocolError(`control message has ${this.bytes.length - this.offset} trailing bytes`);
    }
  }
}

function code<T>(table: readonly T[], value: T): number {
  return table.indexOf(value);
}

function writeRequest(w: Writer, r: Request): void {
  w.str(r.name);
  w.u8(code(kOps, r.op));
  w.u8(code(kDTypes, r.dtype));
  w.u8(code(kReduceOps, r.reduceOp));
  w.i32(r.root);
  w.u8(r.shape.length);
  for (const d of r.shape) w.f64(d);
  w.f64(r.outLength ?? -1);
}

function readRequest(r: Reader): Request {
  const name = r.str('tensor name');
  const op = r.enumOf(kOps, 'op');
  const dtype = r.enumOf(kDTypes, 'dtype') as DType;
  const reduceOp = r.enumOf(kReduceOps, 'reduce op');
  const root = r.i32('root');
  const ndim = r.u8('rank of shape');
  if (ndim > kMaxDims) throw new ProtocolError(`control message has a shape of ${ndim} dimensions`);
  const shape: number[] = [];
  for (let i = 0; i < ndim; i++) shape.push(r.dim('dimension'));
  const outLength = r.f64('out length');
  if (outLength === -1) return { name, op, dtype, shape, reduceOp, root };
  if (!Number.isSafeInteger(outLength) || outLength < 0) {
    throw new ProtocolError(`control message has an out length of ${outLength}`);
  }
  return { name, op, dtype, shape, reduceOp, root, outLength };
}

function writeResponse(w: Writer, r: WireResponse): void {
  if (r.kind === 'cached') {
    w.u8(2);
    w.u32(r.ids.length);
    for (const id of r.ids) w.u32(id);
    return;
  }
  w.u8(r.kind === 'execute' ? 0 : 1);
  w.u32(r.names.length);
  for (const n of r.names) w.str(n);
  if (r.kind === 'execute') {
    w.u8(code(kOps, r.op));
    w.u8(code(kDTypes, r.dtype));
    w.u8(code(kReduceOps, r.reduceOp));
    w.i32(r.root);
    w.u32(r.firstDims.length);
    for (const d of r.firstDims) w.f64(d);
  } else {
    w.u8(code(kErrorKinds, r.errorKind));
    w.str(r.message);
    // 0 ranks means every rank: a stall always has at least one rank that submitted.
    w.u32(r.ranks?.length ?? 0);
    for (const rank of r.ranks ?? []) w.u32(rank);
  }
}

function readResponse(r: Reader): WireResponse {
  const kind = r.u8('response kind');
  if (kind > 2) throw new ProtocolError(`control message has unknown response kind ${kind}`);
  if (kind === 2) {
    const n = r.count('cache ids', 4);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(r.u32('cache id'));
    return { kind: 'cached', ids };
  }
  const count = r.count('names', 4);
  const names: string[] = [];
  for (let i = 0; i < count; i++) names.push(r.str('tensor name'));
  if (kind === 1) {
    const errorKind = r.enumOf(kErrorKinds, 'error kind');
    const message = r.str('error message');
    const n = r.count('error ranks', 4);
    if (n === 0) return { kind: 'error', names, errorKind, message };
    const ranks: number[] = [];
    for (let i = 0; i < n; i++) ranks.push(r.u32('error rank'));
    return { kind: 'error', names, errorKind, message, ranks };
  }
  const op = r.enumOf(kOps, 'op');
  const dtype = r.enumOf(kDTypes, 'dtype') as DType;
  const reduceOp = r.enumOf(kReduceOps, 'reduce op');
  const root = r.i32('root');
  const n = r.count('first dimensions', 8);
  const firstDims: number[] = [];
  for (let i = 0; i < n; i++) firstDims.push(r.dim('first dimension'));
  return { kind: 'execute', names, op, dtype, reduceOp, root, firstDims };
}

export function encodeControl(message: ControlMessage): Uint8Array {
  const w = new Writer();
  w.u8(kTypes.indexOf(message.type));
  if (message.type === 'requests') {
    w.u32(message.requests.length);
    for (const r of message.requests) writeRequest(w, r);
  } else if (message.type === 'responses') {
    w.u32(message.afterRounds);
    w.u32(message.evict.length);
    for (const id of message.evict) w.u32(id);
    w.u32(message.responses.length);
    for (const r of message.responses) writeResponse(w, r);
  } else if (message.type === 'ready') {
    w.u32(message.round);
    w.bytesOf(bitVectorOf(message.ids));
    w.u32(message.eager.length);
    for (const { id, data } of message.eager) {
      w.u32(id);
      w.bytesOf(data);
    }
  }
  return w.finish();
}

export function decodeControl(bytes: Uint8Array): ControlMessage {
  const r = new Reader(bytes);
  const type = r.enumOf(kTypes, 'message type');
  let message: ControlMessage;
  if (type === 'requests') {
    const n = r.count('requests', 12);
    const requests: Request[] = [];
    for (let i = 0; i < n; i++) requests.push(readRequest(r));
    message = { type, requests };
  } else if (type === 'responses') {
    const afterRounds = r.u32('round count');
    const evicted = r.count('evicted ids', 4);
    const evict: number[] = [];
    for (let i = 0; i < evicted; i++) evict.push(r.u32('evicted id'));
    const n = r.count('responses', 5);
    const responses: WireResponse[] = [];
    for (let i = 0; i < n; i++) responses.push(readResponse(r));
    message = { type, afterRounds, evict, responses };
  } else if (type === 'ready') {
    const round = r.u32('round');
    const ids = idsOf(r.bytesOf('ready bit-vector'));
    const n = r.count('eager buffers', 8);
    const eager: { id: number; data: Uint8Array }[] = [];
    for (let i = 0; i < n; i++) eager.push({ id: r.u32('eager id'), data: r.bytesOf('eager buffer') });
    message = { type, round, ids, eager };
  } else {
    message = { type };
  }
  r.end();
  return message;
}

/** The bit-vector of `ids` (non-negative integers). */
function bitVectorOf(ids: readonly number[]): Uint8Array {
  let max = -1;
  for (const id of ids) if (id > max) max = id;
  const bits = new Uint8Array((max + 8) >> 3);
  for (const id of ids) bits[id >> 3] = (bits[id >> 3] as number) | (1 << (id & 7));
  return bits;
}

/** The ids set in a bit-vector, ascending. */
function idsOf(bits: Uint8Array): number[] {
  const ids: number[] = [];
  for (let byte = 0; byte < bits.length; byte++) {
    const b = bits[byte] as number;
    if (b === 0) continue;
    for (let bit = 0; bit < 8; bit++) if (b & (1 << bit)) ids.push(byte * 8 + bit);
  }
  return ids;
}
