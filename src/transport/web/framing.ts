/**
 * Frames of the web transport over a message channel (rendezvous/channel.ts).
 *
 * How it works: a channel already delimits messages, so a frame needs no magic to resync, only
 * what the receiver must know before the bytes: every transport message starts with one
 * channel message holding a 12-byte header (little-endian):
 *
 *   offset  size  field
 *   0       1     version kFrameVersion: a peer of another build is refused at the first frame
 *   1       1     kind    1 = data (matched by recv(peer, tag)), 2 = control (to onControl),
 *                         3 = link (the transport's own: ping, heartbeat, notice, goodbye)
 *   2       2     flags   must be 0
 *   4       4     tag     u32 tag of a data frame; 0 for control; the message of a link frame
 *   8       4     length  u32 payload length in bytes (0 is legal)
 *
 * The payload follows in one of two forms, told apart by the header message's own size:
 * - inline: header and payload in one channel message of 12 + length bytes (small payloads, up
 *   to kInlineMaxBytes, and every link frame): one message instead of two, and a copy that
 *   costs less than a message.
 * - chunked: the header alone (12 bytes), then the payload as raw channel messages of at most
 *   the link's chunk size, in order, until `length` bytes have come. The chunks carry no header,
 *   so the payload is sent without a copy; the price is that nothing else may go between them:
 *   the sender finishes one message's chunks before it starts anything else on that channel,
 *   link frames included (sender.ts). Chunks exist because an RTCDataChannel refuses messages
 *   past 256 KiB in Chromium, and because a WebSocket message is buffered whole before
 *   delivery: chunking lets a large payload land in the receive's `into` piece by piece.
 *
 * Link messages (tag of a link frame): kLinkHeartbeat (empty: "I am alive"), kLinkNotice (u32
 * rank, then a UTF-8 reason: "that rank failed, the job is broken"), kLinkBye (empty: "I am
 * leaving; my channel closes next, and that is not a failure"), kLinkPing (empty: "answer with a
 * heartbeat", ../liveness.ts): the TCP backend's (tcp/framing.ts), with the same meaning.
 *
 * A header is refused (ProtocolError) when its version, kind or flags are unknown, a control
 * frame carries a tag, a link frame has an unknown message or a payload it must not have, or
 * the length exceeds the limit of its kind: the receiver allocates a staging buffer of that
 * length, so the limit is what bounds a garbage header.
 */
import { ProtocolError } from '../../core/errors.js';

export const kFrameVersion = 1;
export const kHeaderBytes = 12;
export const kKindData = 1;
export const kKindControl = 2;
export const kKindLink = 3;
export const kLinkHeartbeat = 1;
export const kLinkNotice = 2;
export const kLinkBye = 3;
export const kLinkPing = 4;
/** A notice is a rank and a short reason. */
export const kMaxLinkBytes = 1024;
/** Payloads up to this size travel inline: one channel message, one small copy. */
export const kInlineMaxBytes = 16 * 1024;
/** Default limit of a data payload (the algorithms send segments of a few MiB). */
export const kDefaultMaxFrameBytes = 1024 * 1024 * 1024;
/** Control messages are negotiation records: small. */
export const kDefaultMaxControlBytes = 16 * 1024 * 1024;
export const kMaxU32 = 0xffff_ffff;

export type FrameKind = typeof kKindData | typeof kKindControl | typeof kKindLink;

export interface FrameHeader {
  kind: FrameKind;
  tag: number;
  length: number;
}

export interface FrameLimits {
  maxFrameBytes: number;
  maxControlBytes: number;
}

/** Writes a header at `out[0..12)`; the caller has validated tag and length. */
export function encodeHeader(kind: FrameKind, tag: number, length: number, out: Uint8Array): void {
  const view = new DataView(out.buffer, out.byteOffset, kHeaderBytes);
  view.setUint8(0, kFrameVersion);
  view.setUint8(1, kind);
  view.setUint16(2, 0, true);
  view.setUint32(4, tag, true);
  view.setUint32(8, length, true);
}

/** A header and its payload in one channel message. */
export function inlineFrame(kind: FrameKind, tag: number, payload: Uint8Array): Uint8Array<ArrayBuffer> {
  const frame = new Uint8Array(kHeaderBytes + payload.byteLength);
  encodeHeader(kind, tag, payload.byteLength, frame);
  frame.set(payload, kHeaderBytes);
  return frame;
}

/** Reads and validates the header at the start of `bytes` (at least 12 bytes); throws ProtocolError. */
export function decodeHeader(bytes: Uint8Array, limits: FrameLimits): FrameHeader {
  if (bytes.byteLength < kHeaderBytes) throw new ProtocolError(`frame of ${bytes.byteLength} bytes: shorter than a header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, kHeaderBytes);
  const version = view.getUint8(0);
  if (version !== kFrameVersion) throw new ProtocolError(`frame version ${version} (this build speaks ${kFrameVersion})`);
  const kind = view.getUint8(1);
  const flags = view.getUint16(2, true);
  const tag = view.getUint32(4, true);
  const length = view.getUint32(8, true);
  if (flags !== 0) throw new ProtocolError(`unknown frame flags 0x${flags.toString(16)}`);
  if (kind === kKindData) {
    if (length > limits.maxFrameBytes) {
      throw new ProtocolError(`data frame of ${length} bytes (tag ${tag}) exceeds the limit of ${limits.maxFrameBytes}`);
    }
    return { kind, tag, length };
  }
  if (kind === kKindControl) {
    if (tag !== 0) throw new ProtocolError(`control frame with non-zero tag ${tag}`);
    if (length > limits.maxControlBytes) {
      throw new ProtocolError(`control frame of ${length} bytes exceeds the limit of ${limits.maxControlBytes}`);
    }
    return { kind, tag, length };
  }
  if (kind === kKindLink) {
    if (!linkLengthValid(tag, length)) throw new ProtocolError(`bad link frame: message ${tag} with ${length} bytes`);
    if (bytes.byteLength !== kHeaderBytes + length) throw new ProtocolError(`link frame ${tag} not sent inline`);
    return { kind, tag, length };
  }
  throw new ProtocolError(`unknown frame kind ${kind}`);
}

function linkLengthValid(message: number, length: number): boolean {
  switch (message) {
    case kLinkNotice:
      return length >= 4 && length <= kMaxLinkBytes;
    case kLinkHeartbeat:
    case kLinkBye:
    case kLinkPing:
      return length === 0;
    default:
      return false;
  }
}

const kUtf8Encoder = new TextEncoder();
const kUtf8 = new TextDecoder('utf-8', { fatal: false });

export interface Notice {
  rank: number;
  reason: string;
}

/** The payload of a kLinkNotice frame: u32 rank of the failed peer, then a UTF-8 reason cut to fit. */
export function encodeNotice(rank: number, reason: string): Uint8Array {
  let text = kUtf8Encoder.encode(reason);
  if (text.byteLength > kMaxLinkBytes - 4) {
    // Cut on a character boundary: decode what fits (a broken last character becomes U+FFFD) and drop that.
    text = kUtf8Encoder.encode(kUtf8.decode(text.subarray(0, kMaxLinkBytes - 8)).replace(/\uFFFD$/, ''));
  }
  const out = new Uint8Array(4 + text.byteLength);
  new DataView(out.buffer).setUint32(0, rank >>> 0, true);
  out.set(text, 4);
  return out;
}

/** Decodes a notice; the header check already bounded its length. */
export function decodeNotice(payload: Uint8Array, size: number): Notice {
  if (payload.byteLength < 4) throw new ProtocolError(`notice of ${payload.byteLength} bytes`);
  const rank = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true);
  if (rank >= size) throw new ProtocolError(`notice names rank ${rank}, outside a job of size ${size}`);
  return { rank, reason: kUtf8.decode(payload.subarray(4)) };
}
