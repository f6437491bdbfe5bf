/**
 * Wire protocol of the store over a WebSocket (web_store_client.ts ↔ web_store_bridge.ts): how a
 * browser rank, which cannot open TCP, reaches the job's store.
 *
 * How it works: one request or reply per WebSocket message (binary), so no framing of our own.
 * A 16-byte header, little-endian:
 *
 *   request (client → bridge)                     reply (bridge → client)
 *   0  u8  kWebStoreVersion                       0  u8  kWebStoreVersion
 *   1  u8  op: set 1, get 2, add 3                1  u8  op: ok 0x82, timeout 0x83, error 0x84
 *   2  u16 key length (1 .. kMaxKeyBytes)         2  u16 0
 *   4  u32 request id                             4  u32 request id (0: about the connection,
 *   8  f64 get: timeout in ms; add: delta;                which the bridge closes next)
 *          set: 0                                 8  f64 add: the new value; else 0
 *   16 key (UTF-8), then the value (set)          16 get: the value; error: a UTF-8 message
 *
 * Requests are pipelined and answered by id, in any order (a get waits for its key). The f64
 * carries every safe integer exactly; a delta or timeout that is not one is malformed. The
 * bridge checks a message's size before anything else (kMaxWebStoreMessageBytes), then its
 * header: a malformed request is answered with an error of id 0 and its connection closed.
 */
import { ProtocolError } from '../core/errors.js';

export const kWebStoreVersion = 1;
export const kWebStoreHeaderBytes = 16;
export const kMaxKeyBytes = 1024;
/** A value of up to 4 MiB (the TCP store's limit), its key and the header. */
export const kMaxWebStoreMessageBytes = 4 * 1024 * 1024 + kMaxKeyBytes + kWebStoreHeaderBytes;

export const kWebOpSet = 1;
export const kWebOpGet = 2;
export const kWebOpAdd = 3;
export const kWebOpOk = 0x82;
export const kWebOpTimeout = 0x83;
export const kWebOpError = 0x84;

const kUtf8Encoder = new TextEncoder();
const kUtf8 = new TextDecoder('utf-8', { fatal: true });
const kUtf8Lenient = new TextDecoder();

export interface WebStoreRequest {
  op: typeof kWebOpSet | typeof kWebOpGet | typeof kWebOpAdd;
  id: number;
  key: string;
  /** get: timeout in ms; add: delta; set: 0. */
  arg: number;
  /** set: the value; else empty. */
  value: Uint8Array;
}

export interface WebStoreReply {
  op: number;
  id: number;
  arg: number;
  body: Uint8Array;
}

function encode(op: number, keyLength: number, id: number, arg: number, tail: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(kWebStoreHeaderBytes + tail.reduce((sum, part) => sum + part.byteLength, 0));
  const view = new DataView(out.buffer);
  view.setUint8(0, kWebStoreVersion);
  view.setUint8(1, op);
  view.setUint16(2, keyLength, true);
  view.setUint32(4, id, true);
  view.setFloat64(8, arg, true);
  let at = kWebStoreHeaderBytes;
  for (const part of tail) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/** The bytes of a request; throws ProtocolError for a key the protocol cannot carry. */
export function encodeRequest(request: WebStoreRequest): Uint8Array<ArrayBuffer> {
  const key = kUtf8Encoder.encode(request.key);
  if (key.byteLength === 0 || key.byteLength > kMaxKeyBytes) {
    throw new ProtocolError(`store key "${request.key.slice(0, 64)}" must be 1..${kMaxKeyBytes} UTF-8 bytes`);
  }
  return encode(request.op, key.byteLength, request.id, request.arg, [key, request.value]);
}

export function encodeReply(op: number, id: number, arg: number, body: Uint8Array): Uint8Array<ArrayBuffer> {
  return encode(op, 0, id, arg, [body]);
}

/** An error reply with a UTF-8 message. */
export function encodeErrorReply(id: number, message: string): Uint8Array<ArrayBuffer> {
  return encodeReply(kWebOpError, id, 0, kUtf8Encoder.encode(message.slice(0, 1000)));
}

function header(bytes: Uint8Array, what: string): DataView {
  if (bytes.byteLength < kWebStoreHeaderBytes) throw new ProtocolError(`${what} of ${bytes.byteLength} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint8(0);
  if (version !== kWebStoreVersion)
    throw new ProtocolError(`${what} of protocol version ${version} (expected ${kWebStoreVersion})`);
  return view;
}

/** Parses a request; throws ProtocolError when anything is off. */
export function decodeRequest(bytes: Uint8Array): WebStoreRequest {
  if (bytes.byteLength > kMaxWebStoreMessageBytes) throw new ProtocolError(`store request of ${bytes.byteLength} bytes`);
  const view = header(bytes, 'store request');
  const op = view.getUint8(1);
  const keyLength = view.getUint16(2, true);
  const id = view.getUint32(4, true);
  const arg = view.getFloat64(8, true);
  if (op !== kWebOpSet && op !== kWebOpGet && op !== kWebOpAdd) throw new ProtocolError(`unknown store op ${op}`);
  if (id === 0) throw new ProtocolError('store request id 0 (reserved)');
  if (keyLength === 0 || keyLength > kMaxKeyBytes || kWebStoreHeaderBytes + keyLength > bytes.byteLength) {
    throw new ProtocolError(`bad store key length ${keyLength} in a request of ${bytes.byteLength} bytes`);
  }
  if (!Number.isSafeInteger(arg) || (op === kWebOpGet && arg < 0) || (op === kWebOpSet && arg !== 0)) {
    throw new ProtocolError(`bad store request argument ${arg}`);
  }
  const keyEnd = kWebStoreHeaderBytes + keyLength;
  if (op !== kWebOpSet && keyEnd !== bytes.byteLength) throw new ProtocolError('store get or add with trailing bytes');
  let key: string;
  try {
    key = kUtf8.decode(bytes.subarray(kWebStoreHeaderBytes, keyEnd));
  } catch {
    throw new ProtocolError('store key is not valid UTF-8');
  }
  return { op, id, key, arg, value: bytes.subarray(keyEnd) };
}

/** Parses a reply; throws ProtocolError when anything is off. */
export function decodeReply(bytes: Uint8Array): WebStoreReply {
  const view = header(bytes, 'store reply');
  const op = view.getUint8(1);
  if (op !== kWebOpOk && op !== kWebOpTimeout && op !== kWebOpError)
    throw new ProtocolError(`unknown store reply op 0x${op.toString(16)}`);
  return { op, id: view.getUint32(4, true), arg: view.getFloat64(8, true), body: bytes.subarray(kWebStoreHeaderBytes) };
}

export function decodeText(bytes: Uint8Array): string {
  return kUtf8Lenient.decode(bytes);
}
