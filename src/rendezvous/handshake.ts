/**
 * Mesh handshake: the first bytes on every data connection.
 *
 * How it works: the dialer sends a hello, the acceptor checks it and answers with an ack; only
 * then does the connection carry frames (acceptor → dialer only, see mesh.ts). Little-endian.
 *
 *   hello (16 + n bytes)                        ack (16 bytes)
 *   0  u32 kMeshMagic                           0  u32 kMeshMagic
 *   4  u16 kMeshVersion                         4  u16 kMeshVersion
 *   6  u8  kHelloKind                           6  u8  kAckKind
 *   7  u8  n = job id length (bytes)            7  u8  status (kAck*)
 *   8  u32 dialer's rank                        8  u32 acceptor's rank
 *   12 u32 world size                           12 u32 world size
 *   16 job id (UTF-8, n bytes)
 *
 * A connection whose first bytes are not a hello with our magic is closed without an answer
 * (it is not one of ours). A hello with our magic but the wrong version, job, size or rank gets
 * an ack with a non-zero status, so the dialer can say exactly what is wrong, and is closed.
 * An HMAC challenge fits here later: a second ack kind carrying a nonce, answered by the dialer.
 */
import { ProtocolError } from '../api/errors.js';
import type { ReadSink } from './read_port.js';

export const kMeshMagic = 0x484d_5252; // 'RRMH' as little-endian bytes
export const kMeshVersion = 1;
export const kHelloKind = 1;
export const kAckKind = 2;
export const kHandshakeBytes = 16;
export const kMaxJobIdBytes = 255;

export const kAckOk = 0;
export const kAckBadVersion = 1;
export const kAckWrongJob = 2;
export const kAckWrongSize = 3;
export const kAckBadRank = 4;
export const kAckDuplicateRank = 5;

const kAckReasons: Record<number, string> = {
  [kAckBadVersion]: 'unsupported handshake version',
  [kAckWrongJob]: 'different job id',
  [kAckWrongSize]: 'different world size',
  [kAckBadRank]: 'rank out of range',
  [kAckDuplicateRank]: 'another connection already claimed this rank',
};

export interface Hello {
  version: number;
  rank: number;
  size: number;
  jobId: string;
}

export function encodeHello(rank: number, size: number, jobId: string): Buffer {
  const job = Buffer.from(jobId, 'utf8');
  if (job.byteLength > kMaxJobIdBytes) throw new ProtocolError(`job id is longer than ${kMaxJobIdBytes} bytes`);
  const out = Buffer.alloc(kHandshakeBytes + job.byteLength);
  writeFixed(out, kHelloKind, job.byteLength, rank, size);
  job.copy(out, kHandshakeBytes);
  return out;
}

export function encodeAck(status: number, rank: number, size: number): Buffer {
  const out = Buffer.alloc(kHandshakeBytes);
  writeFixed(out, kAckKind, status, rank, size);
  return out;
}

function writeFixed(out: Buffer, kind: number, byte7: number, rank: number, size: number): void {
  out.writeUInt32LE(kMeshMagic, 0);
  out.writeUInt16LE(kMeshVersion, 4);
  out.writeUInt8(kind, 6);
  out.writeUInt8(byte7, 7);
  out.writeUInt32LE(rank, 8);
  out.writeUInt32LE(size, 12);
}

/**
 * Length of the whole hello once its fixed part is in `bytes` (≥ 16 bytes), or a
 * ProtocolError if those bytes are not a hello of ours.
 */
export function helloLength(bytes: Buffer): number {
  if (bytes.readUInt32LE(0) !== kMeshMagic || bytes.readUInt8(6) !== kHelloKind) {
    throw new ProtocolError('not a ringreduce mesh hello (bad magic)');
  }
  return kHandshakeBytes + bytes.readUInt8(7);
}

export function decodeHello(bytes: Buffer): Hello {
  return {
    version: bytes.readUInt16LE(4),
    rank: bytes.readUInt32LE(8),
    size: bytes.readUInt32LE(12),
    jobId: bytes.toString('utf8', kHandshakeBytes, kHandshakeBytes + bytes.readUInt8(7)),
  };
}

/** Checks an ack from the peer we dialed; throws ProtocolError saying what is wrong. */
export function checkAck(ack: Buffer, expectedRank: number, size: number, who: string): void {
  if (ack.readUInt32LE(0) !== kMeshMagic || ack.readUInt8(6) !== kAckKind) {
    throw new ProtocolError(`${who} answered the handshake with bytes that are not a ringreduce ack`);
  }
  const status = ack.readUInt8(7);
  if (status !== kAckOk) {
    const version = ack.readUInt16LE(4);
    const reason = kAckReasons[status] ?? `status ${status}`;
    throw new ProtocolError(`${who} refused the connection: ${reason} (its handshake version ${version}, ours ${kMeshVersion})`);
  }
  const rank = ack.readUInt32LE(8);
  const theirSize = ack.readUInt32LE(12);
  if (rank !== expectedRank || theirSize !== size) {
    throw new ProtocolError(`${who} answered as rank ${rank} of ${theirSize}, expected rank ${expectedRank} of ${size}`);
  }
}

/**
 * The dialer's first sink: reads exactly the 16-byte ack (never a byte more, so frames that
 * follow stay in the kernel for the transport), then pauses the socket.
 */
export class AckSink implements ReadSink {
  private readonly ack = Buffer.alloc(kHandshakeBytes);
  private filled = 0;
  private readonly spare = new Uint8Array(1);

  constructor(private readonly onAck: (ack: Buffer) => void) {}

  buffer(): Uint8Array {
    // Once the ack is complete the socket is paused; `spare` only satisfies Node's non-empty rule.
    return this.filled < kHandshakeBytes ? this.ack.subarray(this.filled) : this.spare;
  }

  onRead(nread: number, buf: Uint8Array): boolean {
    if (buf !== this.spare) this.filled += nread;
    if (this.filled < kHandshakeBytes) return true;
    this.onAck(this.ack);
    return false;
  }
}
