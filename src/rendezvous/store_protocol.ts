/**
 * Wire protocol of the TCP store.
 *
 * How it works: both directions carry frames of a 12-byte header and a body. Integers are
 * little-endian.
 *
 *   header: magic u16 (kStoreMagic) | version u8 | op u8 | requestId u32 | bodyLength u32
 *
 *   client → server                                server → client
 *   kOpHello  nonceC (32 bytes)                    kOpHelloOk nonceS (32) | proofS (32)
 *   kOpAuth   proofC (32 bytes)                    kOpOk      empty: authenticated
 *   kOpSet    keyLen u16 | key | value             kOpOk      value (get), i64 (add), empty (set)
 *   kOpGet    timeoutMs u32 | keyLen u16 | key     kOpTimeout empty: the get's deadline passed
 *   kOpAdd    delta i64 | keyLen u16 | key         kOpError   UTF-8 message (requestId 0: the
 *                                                             connection is closed after it)
 *
 * A connection starts with a mutual challenge-response (auth.ts): the server proves it knows
 * the job secret with proofS = HMAC(secret, "store server", nonceC, nonceS), the client with
 * proofC = HMAC(secret, "store client", nonceC, nonceS). The hello and auth use requestId 0.
 * Until the client is authenticated, the only frames accepted are the hello and then the auth,
 * their bodies limited to kMaxPreAuthBytes, and the whole exchange to a deadline: a stranger
 * can neither read nor write a key, nor make the server allocate. After it, requests are
 * pipelined and answered by requestId, in any order (a waiting get is answered when its key is
 * set). Every header is checked (magic, version, known op, body limit) before its body is
 * buffered, so a garbage length cannot make either side allocate.
 */
import { InvalidArgumentError, ProtocolError } from '../core/errors.js';

export const kStoreMagic = 0x5352; // 'RS' little-endian
export const kStoreVersion = 2;
export const kStoreHeaderBytes = 12;
export const kMaxKeyBytes = 1024;
export const kDefaultMaxStoreFrameBytes = 4 * 1024 * 1024;

export const kOpHello = 0x01;
export const kOpSet = 0x02;
export const kOpGet = 0x03;
export const kOpAdd = 0x04;
export const kOpAuth = 0x05;
export const kOpHelloOk = 0x81;
export const kOpOk = 0x82;
export const kOpTimeout = 0x83;
export const kOpError = 0x84;
/** Largest body a client may send before it is authenticated (the hello and the auth are 32 bytes). */
export const kMaxPreAuthBytes = 64;
export const kStoreServerLabel = 'ringreduce store server';
export const kStoreClientLabel = 'ringreduce store client';

const kKnownOps = new Set([kOpHello, kOpSet, kOpGet, kOpAdd, kOpAuth, kOpHelloOk, kOpOk, kOpTimeout, kOpError]);
const kUtf8 = new TextDecoder('utf-8', { fatal: true });
const kUtf8Encoder = new TextEncoder();

export interface StoreFrame {
  op: number;
  requestId: number;
  body: Uint8Array;
}

export function encodeFrame(op: number, requestId: number, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(kStoreHeaderBytes + body.byteLength);
  out.writeUInt16LE(kStoreMagic, 0);
  out.writeUInt8(kStoreVersion, 2);
  out.writeUInt8(op, 3);
  out.writeUInt32LE(requestId, 4);
  out.writeUInt32LE(body.byteLength, 8);
  out.set(body, kStoreHeaderBytes);
  return out;
}

/** Body of a keyed request: `prefix` fixed bytes, then keyLen u16 | key, then `tail`. */
export function encodeKeyed(prefix: Uint8Array, key: string, tail: Uint8Array = new Uint8Array(0)): Uint8Array {
  const keyBytes = encodeKey(key);
  const out = Buffer.allocUnsafe(prefix.byteLength + 2 + keyBytes.byteLength + tail.byteLength);
  out.set(prefix, 0);
  out.writeUInt16LE(keyBytes.byteLength, prefix.byteLength);
  out.set(keyBytes, prefix.byteLength + 2);
  out.set(tail, prefix.byteLength + 2 + keyBytes.byteLength);
  return out;
}

export function encodeKey(key: string): Uint8Array {
  const bytes = kUtf8Encoder.encode(key);
  if (bytes.byteLength === 0 || bytes.byteLength > kMaxKeyBytes) {
    throw new InvalidArgumentError(`store key "${key.slice(0, 64)}" must be 1..${kMaxKeyBytes} UTF-8 bytes`);
  }
  return bytes;
}

/** Splits a keyed body after `prefixBytes` fixed bytes into key and the rest. */
export function decodeKeyed(body: Uint8Array, prefixBytes: number): { key: string; rest: Uint8Array } {
  if (body.byteLength < prefixBytes + 2) throw new ProtocolError(`store request body too short (${body.byteLength} bytes)`);
  const keyLength = (body[prefixBytes] as number) | ((body[prefixBytes + 1] as number) << 8);
  const keyEnd = prefixBytes + 2 + keyLength;
  if (keyLength === 0 || keyLength > kMaxKeyBytes || keyEnd > body.byteLength) {
    throw new ProtocolError(`bad store key length ${keyLength} in a body of ${body.byteLength} bytes`);
  }
  let key: string;
  try {
    key = kUtf8.decode(body.subarray(prefixBytes + 2, keyEnd));
  } catch {
    throw new ProtocolError('store key is not valid UTF-8');
  }
  return { key, rest: body.subarray(keyEnd) };
}

export function encodeI64(value: number): Uint8Array {
  const out = Buffer.allocUnsafe(8);
  out.writeBigInt64LE(BigInt(value), 0);
  return out;
}

export function decodeI64(bytes: Uint8Array, what: string): number {
  if (bytes.byteLength !== 8) throw new ProtocolError(`${what}: expected an 8-byte integer, got ${bytes.byteLength} bytes`);
  const value = Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigInt64LE(0);
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new ProtocolError(`${what}: counter ${value} is outside the safe integer range`);
  }
  return Number(value);
}

export function decodeText(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

/**
 * Incremental frame parser: push socket chunks, get whole frames. The body buffer is
 * allocated once per frame at its exact (checked) length.
 */
export class StoreFrameReader {
  private readonly header = new Uint8Array(kStoreHeaderBytes);
  private headerFill = 0;
  private body: Uint8Array | null = null;
  private bodyFill = 0;
  private op = 0;
  private requestId = 0;

  /** The body limit; the server raises it once the client is authenticated. */
  constructor(public maxFrameBytes: number) {}

  /** Parses `chunk`; throws ProtocolError on the first bad header. */
  push(chunk: Uint8Array, onFrame: (frame: StoreFrame) => void): void {
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.body === null) {
        const n = Math.min(kStoreHeaderBytes - this.headerFill, chunk.byteLength - at);
        this.header.set(chunk.subarray(at, at + n), this.headerFill);
        this.headerFill += n;
        at += n;
        if (this.headerFill < kStoreHeaderBytes) return;
        this.body = new Uint8Array(this.checkHeader());
        this.bodyFill = 0;
      }
      const n = Math.min(this.body.byteLength - this.bodyFill, chunk.byteLength - at);
      this.body.set(chunk.subarray(at, at + n), this.bodyFill);
      this.bodyFill += n;
      at += n;
      if (this.bodyFill === this.body.byteLength) {
        const frame = { op: this.op, requestId: this.requestId, body: this.body };
        this.body = null;
        this.headerFill = 0;
        onFrame(frame);
      }
    }
  }

  private checkHeader(): number {
    const h = Buffer.from(this.header.buffer, 0, kStoreHeaderBytes);
    const magic = h.readUInt16LE(0);
    if (magic !== kStoreMagic) throw new ProtocolError(`bad store frame magic 0x${magic.toString(16)}`);
    const version = h.readUInt8(2);
    if (version !== kStoreVersion) throw new ProtocolError(`unsupported store protocol version ${version}`);
    this.op = h.readUInt8(3);
    if (!kKnownOps.has(this.op)) throw new ProtocolError(`unknown store op 0x${this.op.toString(16)}`);
    this.requestId = h.readUInt32LE(4);
    const length = h.readUInt32LE(8);
    if (length > this.maxFrameBytes) {
      throw new ProtocolError(`store frame of ${length} bytes exceeds the limit of ${this.maxFrameBytes}`);
    }
    return length;
  }
}
