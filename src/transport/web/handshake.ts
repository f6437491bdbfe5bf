/**
 * The handshake of a web link: the first four messages on every channel (WebSocket or data
 * channel), before any frame. The protocol of the TCP mesh (rendezvous/handshake.ts), one
 * channel message per step, with WebCrypto proofs (link_auth.ts). Little-endian.
 *
 *   1. hello, dialer → acceptor (48 + n bytes)   2. challenge, acceptor → dialer (80 bytes)
 *   0  u32 kWebLinkMagic                         0  u32 kWebLinkMagic
 *   4  u16 kWebLinkVersion                       4  u16 kWebLinkVersion
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
 * proofA = HMAC(secret, "ringreduce web link acceptor", transcript) and proofD = HMAC(secret,
 * "ringreduce web link dialer", transcript); the transcript is the job id, the size, the
 * dialer's and the acceptor's rank and both nonces. The labels differ from the TCP mesh's, so
 * a proof never serves in the other protocol. Who dials: the rank that opens the WebSocket, or
 * the offerer of a data channel (mesh.ts).
 *
 * Refusals: a first message that is not a hello with our magic is closed without an answer (it
 * is not one of ours). A hello with the wrong version, job, size or rank (out of range, or one
 * that should not dial this rank) gets a challenge with that status and is closed, so the
 * dialer can say exactly what is wrong; so does a response whose proof fails (ack kAckBadAuth)
 * and a rank already linked (ack kAckDuplicateRank). The acceptor proves itself first, so a
 * dialer learns that it reached a stranger before it sends a proof of its own. Every message
 * has a fixed size, or one bounded by kMaxJobIdBytes.
 */
import { ProtocolError, TimeoutError } from '../../core/errors.js';
import type { ChannelPort } from '../../rendezvous/channel.js';
import { kMacBytes, kNonceBytes, newNonce, u32Bytes, type WebJobKey } from './link_auth.js';

export const kWebLinkMagic = 0x4857_5252; // 'RRWH' as little-endian bytes
export const kWebLinkVersion = 1;
const kHelloKind = 1;
const kChallengeKind = 2;
const kResponseKind = 3;
const kAckKind = 4;
const kFixedBytes = 16;
const kHelloFixedBytes = kFixedBytes + kNonceBytes;
const kChallengeBytes = kFixedBytes + kNonceBytes + kMacBytes;
const kResponseBytes = kFixedBytes + kMacBytes;
export const kMaxJobIdBytes = 255;

export const kAckOk = 0;
export const kAckBadVersion = 1;
export const kAckWrongJob = 2;
export const kAckWrongSize = 3;
export const kAckBadRank = 4;
export const kAckDuplicateRank = 5;
export const kAckBadAuth = 6;
export const kAckUnexpectedRank = 7;

const kAckReasons: Record<number, string> = {
  [kAckBadVersion]: 'unsupported handshake version',
  [kAckWrongJob]: 'different job id',
  [kAckWrongSize]: 'different world size',
  [kAckBadRank]: 'rank out of range',
  [kAckDuplicateRank]: 'another connection already claimed this rank',
  [kAckBadAuth]: 'authentication failed: wrong or missing job secret (RINGREDUCE_SECRET)',
  [kAckUnexpectedRank]: 'that rank does not dial this one (the rank with the higher number, or the one without a URL, dials)',
};

const kAcceptorLabel = 'ringreduce web link acceptor';
const kDialerLabel = 'ringreduce web link dialer';
const kUtf8Encoder = new TextEncoder();
const kUtf8 = new TextDecoder('utf-8', { fatal: true });

/** This rank's side of every handshake. */
export interface LinkIdentity {
  rank: number;
  size: number;
  jobId: string;
  key: WebJobKey;
}

/** A connection the acceptor refused: why, for the log and for a timeout's message. */
export class Refused extends Error {
  constructor(
    readonly remote: string,
    readonly reason: string,
  ) {
    super(`${remote}: ${reason}`);
  }
}

interface Transcript {
  jobId: string;
  size: number;
  dialer: number;
  acceptor: number;
  dialerNonce: Uint8Array;
  acceptorNonce: Uint8Array;
}

function parts(t: Transcript): Uint8Array[] {
  return [
    kUtf8Encoder.encode(t.jobId),
    u32Bytes(t.size),
    u32Bytes(t.dialer),
    u32Bytes(t.acceptor),
    t.dialerNonce,
    t.acceptorNonce,
  ];
}

function message(length: number, kind: number, byte7: number, rank: number, size: number): [Uint8Array<ArrayBuffer>, DataView] {
  const out = new Uint8Array(length);
  const view = new DataView(out.buffer);
  view.setUint32(0, kWebLinkMagic, true);
  view.setUint16(4, kWebLinkVersion, true);
  view.setUint8(6, kind);
  view.setUint8(7, byte7);
  view.setUint32(8, rank, true);
  view.setUint32(12, size, true);
  return [out, view];
}

interface Fixed {
  version: number;
  kind: number;
  byte7: number;
  rank: number;
  size: number;
}

/** The fixed 16 bytes of a message of ours, or null when `bytes` is not one. */
function fixedOf(bytes: Uint8Array | null): Fixed | null {
  if (bytes === null || bytes.byteLength < kFixedBytes) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, kFixedBytes);
  if (view.getUint32(0, true) !== kWebLinkMagic) return null;
  return {
    version: view.getUint16(4, true),
    kind: view.getUint8(6),
    byte7: view.getUint8(7),
    rank: view.getUint32(8, true),
    size: view.getUint32(12, true),
  };
}

function next(port: ChannelPort, deadline: number, what: string): Promise<Uint8Array | null> {
  return port.next(
    deadline,
    () => new TimeoutError(`${what}: no handshake message in time`),
    (cause) => new ProtocolError(`${what} closed the connection during the handshake (${cause})`),
  );
}

/**
 * The dialer's side, on an open channel to `peer`: proves this rank and checks that the other
 * end is `peer` of the same job. Rejects with ProtocolError naming `who` and the reason when
 * either side refuses, TimeoutError at `deadline` (performance.now() clock).
 */
export async function dialLink(
  port: ChannelPort,
  self: LinkIdentity,
  peer: number,
  who: string,
  deadline: number,
): Promise<void> {
  const job = kUtf8Encoder.encode(self.jobId);
  if (job.byteLength > kMaxJobIdBytes) throw new ProtocolError(`job id is longer than ${kMaxJobIdBytes} bytes`);
  const ourNonce = newNonce();
  const [hello] = message(kHelloFixedBytes + job.byteLength, kHelloKind, job.byteLength, self.rank, self.size);
  hello.set(ourNonce, kFixedBytes);
  hello.set(job, kHelloFixedBytes);
  port.channel.send(hello);
  const challenge = await next(port, deadline, who);
  const fixed = checkAnswer(challenge, kChallengeKind, kChallengeBytes, peer, self.size, who);
  const body = challenge as Uint8Array;
  const transcript: Transcript = {
    jobId: self.jobId,
    size: self.size,
    dialer: self.rank,
    acceptor: fixed.rank,
    dialerNonce: ourNonce,
    acceptorNonce: body.slice(kFixedBytes, kFixedBytes + kNonceBytes),
  };
  if (!(await self.key.verify(body.subarray(kFixedBytes + kNonceBytes, kChallengeBytes), kAcceptorLabel, ...parts(transcript)))) {
    throw new ProtocolError(
      `${who} could not prove it knows the job secret: it is not a rank of this job, or RINGREDUCE_SECRET differs`,
    );
  }
  const [response] = message(kResponseBytes, kResponseKind, 0, self.rank, self.size);
  response.set(await self.key.mac(kDialerLabel, ...parts(transcript)), kFixedBytes);
  port.channel.send(response);
  checkAnswer(await next(port, deadline, who), kAckKind, kFixedBytes, peer, self.size, who);
}

/** Checks a challenge or ack from the rank we dialed; throws ProtocolError with the refusal's reason. */
function checkAnswer(bytes: Uint8Array | null, kind: number, length: number, peer: number, size: number, who: string): Fixed {
  const fixed = fixedOf(bytes);
  if (fixed === null || fixed.kind !== kind) {
    throw new ProtocolError(
      `${who} answered the handshake with a message that is not a ringreduce web link ${kind === kAckKind ? 'ack' : 'challenge'}`,
    );
  }
  if (fixed.byte7 !== kAckOk) {
    const reason = kAckReasons[fixed.byte7] ?? `status ${fixed.byte7}`;
    throw new ProtocolError(
      `${who} refused the connection: ${reason} (its handshake version ${fixed.version}, ours ${kWebLinkVersion})`,
    );
  }
  if ((bytes as Uint8Array).byteLength !== length) throw new ProtocolError(`${who} sent a handshake message of the wrong size`);
  if (fixed.rank !== peer || fixed.size !== size) {
    throw new ProtocolError(`${who} answered as rank ${fixed.rank} of ${fixed.size}, expected rank ${peer} of ${size}`);
  }
  return fixed;
}

/** What the acceptor asks about a dialer that proved itself: may it take its rank's slot? */
export interface Admission {
  /** kAckOk when `rank` may dial this rank (before the proof), else kAckBadRank or kAckUnexpectedRank. */
  expects(rank: number): Promise<number>;
  /** Takes `rank`'s slot after the proof; false when it is taken (kAckDuplicateRank). */
  claim(rank: number): boolean;
}

/**
 * The acceptor's side, on an open channel from `remote`: resolves with the dialer's rank once
 * it has proven it belongs to this job and taken its slot. A refusal answers as the header says,
 * closes the channel and rejects with Refused; a timeout closes it and rejects with Refused too.
 */
export async function acceptLink(
  port: ChannelPort,
  self: LinkIdentity,
  admission: Admission,
  remote: string,
  deadline: number,
): Promise<number> {
  const refuse = (reason: string, answer?: Uint8Array<ArrayBuffer>): never => {
    if (answer) port.channel.send(answer);
    port.channel.close();
    throw new Refused(remote, reason);
  };
  const refusal = (status: number) => message(kChallengeBytes, kChallengeKind, status, self.rank, self.size)[0];
  let bytes: Uint8Array | null;
  try {
    bytes = await next(port, deadline, remote);
  } catch (error) {
    return refuse(`no hello: ${(error as Error).message}`);
  }
  const hello = fixedOf(bytes);
  if (hello === null || hello.kind !== kHelloKind) return refuse('not a ringreduce web link (no hello)');
  if (hello.version !== kWebLinkVersion) return refuse(`handshake version ${hello.version}`, refusal(kAckBadVersion));
  const body = bytes as Uint8Array;
  let jobId: string;
  try {
    if (body.byteLength !== kHelloFixedBytes + hello.byte7) throw new Error('length');
    jobId = kUtf8.decode(body.subarray(kHelloFixedBytes));
  } catch {
    return refuse('malformed hello');
  }
  if (jobId !== self.jobId) return refuse(`job "${jobId.slice(0, 64)}"`, refusal(kAckWrongJob));
  if (hello.size !== self.size) return refuse(`world size ${hello.size}`, refusal(kAckWrongSize));
  const status = hello.rank >= self.size || hello.rank === self.rank ? kAckBadRank : await admission.expects(hello.rank);
  if (status !== kAckOk) return refuse(`rank ${hello.rank}: ${kAckReasons[status]}`, refusal(status));
  const transcript: Transcript = {
    jobId,
    size: self.size,
    dialer: hello.rank,
    acceptor: self.rank,
    dialerNonce: body.slice(kFixedBytes, kHelloFixedBytes),
    acceptorNonce: newNonce(),
  };
  const [challenge] = message(kChallengeBytes, kChallengeKind, kAckOk, self.rank, self.size);
  challenge.set(transcript.acceptorNonce, kFixedBytes);
  challenge.set(await self.key.mac(kAcceptorLabel, ...parts(transcript)), kFixedBytes + kNonceBytes);
  port.channel.send(challenge);
  const ack = (status: number) => message(kFixedBytes, kAckKind, status, self.rank, self.size)[0];
  try {
    bytes = await next(port, deadline, remote);
  } catch (error) {
    return refuse(`rank ${hello.rank} sent no response: ${(error as Error).message}`);
  }
  const response = fixedOf(bytes);
  if (
    response?.kind !== kResponseKind ||
    response.rank !== hello.rank ||
    response.size !== self.size ||
    bytes?.byteLength !== kResponseBytes
  ) {
    return refuse(`rank ${hello.rank}: malformed response`);
  }
  const proof = (bytes as Uint8Array).subarray(kFixedBytes);
  if (!(await self.key.verify(proof, kDialerLabel, ...parts(transcript)))) {
    return refuse(`rank ${hello.rank}: ${kAckReasons[kAckBadAuth]}`, ack(kAckBadAuth));
  }
  if (!admission.claim(hello.rank))
    return refuse(`rank ${hello.rank}: ${kAckReasons[kAckDuplicateRank]}`, ack(kAckDuplicateRank));
  port.channel.send(ack(kAckOk));
  return hello.rank;
}
