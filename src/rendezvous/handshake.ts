/**
 * Mesh handshake: the first bytes on every data connection.
 *
 * How it works: four messages, then the connection carries frames (acceptor → dialer only, see
 * mesh.ts). Both sides prove they know the job secret (auth.ts); neither sends it. Little-endian.
 *
 *   1. hello, dialer → acceptor (48 + n bytes)   2. challenge, acceptor → dialer (80 bytes)
 *   0  u32 kMeshMagic                            0  u32 kMeshMagic
 *   4  u16 kMeshVersion                          4  u16 kMeshVersion
 *   6  u8  kHelloKind                            6  u8  kChallengeKind
 *   7  u8  n = job id length (bytes)             7  u8  status (kAck*)
 *   8  u32 dialer's rank                         8  u32 acceptor's rank
 *   12 u32 world size                            12 u32 world size
 *   16 nonceD (32 bytes)                         16 nonceA (32 bytes)
 *   48 job id (UTF-8, n bytes)                   48 proofA (32 bytes)
 *
 *   3. response, dialer → acceptor (48 bytes)    4. ack, acceptor → dialer (16 bytes)
 *   0..15 as the hello, with kResponseKind, n=0  0..15 as the challenge, with kAckKind
 *   16 proofD (32 bytes)
 *
 * proofA = HMAC(secret, "mesh acceptor", transcript) and proofD = HMAC(secret, "mesh dialer",
 * transcript), where the transcript is the job id, the size, the dialer's and the acceptor's
 * rank, nonceD and nonceA. A connection whose first bytes are not a hello with our magic is
 * closed without an answer (it is not one of ours). A hello with our magic but the wrong
 * version, job, size or rank gets a challenge with a non-zero status, so the dialer can say
 * exactly what is wrong, and is closed; so is a response whose proof fails (ack kAckBadAuth).
 * Every message has a fixed size, or one bounded by kMaxJobIdBytes: nothing here allocates
 * more than a few hundred bytes for a stranger.
 */
import { ProtocolError } from '../core/errors.js';
import { type JobKey, kMacBytes, kNonceBytes, u32Bytes } from './auth.js';
import type { ReadSink } from './read_port.js';

export const kMeshMagic = 0x484d_5252; // 'RRMH' as little-endian bytes
export const kMeshVersion = 2;
export const kHelloKind = 1;
export const kChallengeKind = 2;
export const kResponseKind = 3;
export const kAckKind = 4;
export const kFixedBytes = 16;
export const kHelloFixedBytes = kFixedBytes + kNonceBytes;
export const kChallengeBytes = kFixedBytes + kNonceBytes + kMacBytes;
export const kResponseBytes = kFixedBytes + kMacBytes;
export const kAckBytes = kFixedBytes;
export const kMaxJobIdBytes = 255;

export const kAckOk = 0;
export const kAckBadVersion = 1;
export const kAckWrongJob = 2;
export const kAckWrongSize = 3;
export const kAckBadRank = 4;
export const kAckDuplicateRank = 5;
export const kAckBadAuth = 6;

const kAckReasons: Record<number, string> = {
  [kAckBadVersion]: 'unsupported handshake version',
  [kAckWrongJob]: 'different job id',
  [kAckWrongSize]: 'different world size',
  [kAckBadRank]: 'rank out of range',
  [kAckDuplicateRank]: 'another connection already claimed this rank',
  [kAckBadAuth]: 'authentication failed: wrong or missing job secret (RINGREDUCE_SECRET)',
};

const kAcceptorLabel = 'ringreduce mesh acceptor';
const kDialerLabel = 'ringreduce mesh dialer';

export interface Hello {
  version: number;
  rank: number;
  size: number;
  nonce: Buffer;
  jobId: string;
}

/** What both sides of one connection agree on: the proofs cover all of it. */
export interface Transcript {
  jobId: string;
  size: number;
  dialer: number;
  acceptor: number;
  dialerNonce: Uint8Array;
  acceptorNonce: Uint8Array;
}

function transcriptParts(t: Transcript): Uint8Array[] {
  return [
    Buffer.from(t.jobId, 'utf8'),
    u32Bytes(t.size),
    u32Bytes(t.dialer),
    u32Bytes(t.acceptor),
    t.dialerNonce,
    t.acceptorNonce,
  ];
}

export function acceptorProof(key: JobKey, t: Transcript): Buffer {
  return key.mac(kAcceptorLabel, ...transcriptParts(t));
}

export function dialerProof(key: JobKey, t: Transcript): Buffer {
  return key.mac(kDialerLabel, ...transcriptParts(t));
}

export function verifyAcceptor(key: JobKey, t: Transcript, proof: Uint8Array): boolean {
  return key.verify(proof, kAcceptorLabel, ...transcriptParts(t));
}

export function verifyDialer(key: JobKey, t: Transcript, proof: Uint8Array): boolean {
  return key.verify(proof, kDialerLabel, ...transcriptParts(t));
}

export function encodeHello(rank: number, size: number, jobId: string, nonce: Uint8Array): Buffer {
  const job = Buffer.from(jobId, 'utf8');
  if (job.byteLength > kMaxJobIdBytes) throw new ProtocolError(`job id is longer than ${kMaxJobIdBytes} bytes`);
  const out = Buffer.alloc(kHelloFixedBytes + job.byteLength);
  writeFixed(out, kHelloKind, job.byteLength, rank, size);
  out.set(nonce, kFixedBytes);
  job.copy(out, kHelloFixedBytes);
  return out;
}

/** A challenge; a refusal (status ≠ kAckOk) carries zeros for nonce and proof. */
export function encodeChallenge(status: number, rank: number, size: number, nonce?: Uint8Array, proof?: Uint8Array): Buffer {
  const out = Buffer.alloc(kChallengeBytes);
  writeFixed(out, kChallengeKind, status, rank, size);
  if (nonce) out.set(nonce, kFixedBytes);
  if (proof) out.set(proof, kFixedBytes + kNonceBytes);
  return out;
}

export function encodeResponse(rank: number, size: number, proof: Uint8Array): Buffer {
  const out = Buffer.alloc(kResponseBytes);
  writeFixed(out, kResponseKind, 0, rank, size);
  out.set(proof, kFixedBytes);
  return out;
}

export function encodeAck(status: number, rank: number, size: number): Buffer {
  const out = Buffer.alloc(kAckBytes);
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

function checkKind(bytes: Buffer, kind: number, what: string): void {
  if (bytes.byteLength < kFixedBytes || bytes.readUInt32LE(0) !== kMeshMagic || bytes.readUInt8(6) !== kind) {
    throw new ProtocolError(`not a ringreduce mesh ${what} (bad magic or kind)`);
  }
}

/**
 * Length of the whole hello once its first 16 bytes are in `bytes`, or a ProtocolError if
 * those bytes are not a hello of ours.
 */
export function helloLength(bytes: Buffer): number {
  checkKind(bytes, kHelloKind, 'hello');
  return kHelloFixedBytes + bytes.readUInt8(7);
}

export function decodeHello(bytes: Buffer): Hello {
  const length = helloLength(bytes);
  if (bytes.byteLength !== length) throw new ProtocolError(`hello of ${bytes.byteLength} bytes, expected ${length}`);
  return {
    version: bytes.readUInt16LE(4),
    rank: bytes.readUInt32LE(8),
    size: bytes.readUInt32LE(12),
    nonce: Buffer.from(bytes.subarray(kFixedBytes, kHelloFixedBytes)),
    jobId: bytes.toString('utf8', kHelloFixedBytes, length),
  };
}

/** The dialer's proof from a response, after checking its header against the hello. */
export function decodeResponse(bytes: Buffer, rank: number, size: number): Buffer {
  checkKind(bytes, kResponseKind, 'response');
  if (bytes.byteLength !== kResponseBytes || bytes.readUInt32LE(8) !== rank || bytes.readUInt32LE(12) !== size) {
    throw new ProtocolError('mesh response does not match its hello');
  }
  return bytes.subarray(kFixedBytes);
}

/** Checks the status, rank and size of a challenge or ack from the peer we dialed. */
function checkAnswer(bytes: Buffer, kind: number, expectedRank: number, size: number, who: string): void {
  if (bytes.readUInt32LE(0) !== kMeshMagic || bytes.readUInt8(6) !== kind) {
    throw new ProtocolError(
      `${who} answered the handshake with bytes that are not a ringreduce ${kind === kAckKind ? 'ack' : 'challenge'}`,
    );
  }
  const status = bytes.readUInt8(7);
  if (status !== kAckOk) {
    const version = bytes.readUInt16LE(4);
    const reason = kAckReasons[status] ?? `status ${status}`;
    throw new ProtocolError(`${who} refused the connection: ${reason} (its handshake version ${version}, ours ${kMeshVersion})`);
  }
  const rank = bytes.readUInt32LE(8);
  const theirSize = bytes.readUInt32LE(12);
  if (rank !== expectedRank || theirSize !== size) {
    throw new ProtocolError(`${who} answered as rank ${rank} of ${theirSize}, expected rank ${expectedRank} of ${size}`);
  }
}

/** Checks a challenge; returns the acceptor's nonce and proof. */
export function checkChallenge(bytes: Buffer, expectedRank: number, size: number, who: string): { nonce: Buffer; proof: Buffer } {
  checkAnswer(bytes, kChallengeKind, expectedRank, size, who);
  return {
    nonce: bytes.subarray(kFixedBytes, kFixedBytes + kNonceBytes),
    proof: bytes.subarray(kFixedBytes + kNonceBytes, kChallengeBytes),
  };
}

export function checkAck(bytes: Buffer, expectedRank: number, size: number, who: string): void {
  checkAnswer(bytes, kAckKind, expectedRank, size, who);
}

/**
 * A sink that reads exactly `length` bytes (never a byte more, so frames that follow stay in
 * the kernel for the next sink), then pauses the socket. The first read after a hand-over may
 * land in the previous sink's array (read_port.ts): those bytes are copied.
 */
export class ExactSink implements ReadSink {
  private readonly bytes: Buffer;
  private filled = 0;
  private handed: Uint8Array | null = null;
  private readonly spare = new Uint8Array(1);

  constructor(
    length: number,
    private readonly onComplete: (bytes: Buffer) => void,
  ) {
    this.bytes = Buffer.alloc(length);
  }

  buffer(): Uint8Array {
    // Once complete the socket is paused; `spare` only satisfies Node's non-empty rule.
    this.handed = this.filled < this.bytes.byteLength ? this.bytes.subarray(this.filled) : this.spare;
    return this.handed;
  }

  onRead(nread: number, buf: Uint8Array): boolean {
    if (buf === this.handed) {
      this.filled += nread;
    } else {
      // A foreign array: at most the previous sink's 1-byte spare. Keep what fits.
      const n = Math.min(nread, this.bytes.byteLength - this.filled);
      this.bytes.set(buf.subarray(0, n), this.filled);
      this.filled += n;
    }
    if (this.filled < this.bytes.byteLength) return true;
    this.onComplete(this.bytes);
    return false;
  }
}
