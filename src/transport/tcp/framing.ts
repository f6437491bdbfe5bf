/**
 * Frame header of the TCP transport.
 *
 * How it works: every message on a data connection is one 12-byte header followed by its
 * payload. All integers are little-endian (every platform we run on is, so no swapping).
 *
 *   offset  size  field
 *   0       1     magic   kFrameMagic (0x52, 'R'): catches a desynchronised stream early
 *   1       1     kind    1 = data (matched by recv(peer, tag)), 2 = control (to onControl),
 *                         3 = link (the transport's own: heartbeat, failure notice, goodbye),
 *                         4 = shared data (a data message whose bytes wait in the shared-memory
 *                         lane, shm_lane.ts; the payload is its 8-byte descriptor)
 *   2       2     flags   must be 0 (reserved for later use, e.g. compression)
 *   4       4     tag     u32 tag of a data frame; 0 for control frames; the message of a link frame
 *   8       4     length  u32 payload length in bytes (0 is legal)
 *
 * Link frames (tag = message): kLinkHeartbeat (empty: "I am alive"), kLinkNotice (u32 rank,
 * then a UTF-8 reason: "that rank failed, the job is broken"), kLinkBye (empty: "I am shutting
 * down; my connections close next, and that is not a failure"), kLinkPing (empty: "are you
 * alive? answer with a heartbeat", ../liveness.ts), and the shared-memory lane's (shm_lane.ts):
 * kLinkShmOffer (token, geometry and path of a file), kLinkShmAccept and kLinkShmDecline (empty),
 * kLinkShmCredit (u32 slots handed back).
 *
 * A header is refused (ProtocolError) when the magic, kind or flags are unknown, when a control
 * frame carries a tag, when a link frame has an unknown message or a payload it must not have,
 * or when the length exceeds the limit for its kind: the receiver may allocate a staging buffer
 * of that length, so the limit is what bounds a garbage header.
 */
import { ProtocolError } from '../../core/errors.js';

export const kFrameMagic = 0x52;
export const kHeaderBytes = 12;
export const kKindData = 1;
export const kKindControl = 2;
export const kKindLink = 3;
export const kLinkHeartbeat = 1;
export const kLinkNotice = 2;
export const kLinkBye = 3;
export const kLinkPing = 4;
export const kLinkShmOffer = 5;
export const kLinkShmAccept = 6;
export const kLinkShmDecline = 7;
export const kLinkShmCredit = 8;
export const kKindSharedData = 4;
/** The payload of a shared data frame: u32 slot, u32 message length. */
export const kSharedDescriptorBytes = 8;
/** A notice is a rank and a short reason. */
export const kMaxLinkBytes = 1024;
/** The largest u32: tags and lengths travel as u32. */
export const kMaxU32 = 0xffff_ffff;
/** Default limit of a data payload; the algorithms split larger tensors into segments. */
export const kDefaultMaxFrameBytes = 1024 * 1024 * 1024;
/** Control messages are negotiation records: small. */
export const kDefaultMaxControlBytes = 16 * 1024 * 1024;

export type FrameKind = typeof kKindData | typeof kKindControl | typeof kKindLink | typeof kKindSharedData;

export interface FrameHeader {
  kind: FrameKind;
  tag: number;
  length: number;
}

export interface FrameLimits {
  maxFrameBytes: number;
  maxControlBytes: number;
}

/** Writes a header at `out[offset..offset+12)`. The caller has validated tag and length. */
export function encodeHeader(kind: FrameKind, tag: number, length: number, out: Uint8Array, offset = 0): void {
  out[offset] = kFrameMagic;
  out[offset + 1] = kind;
  out[offset + 2] = 0;
  out[offset + 3] = 0;
  writeU32(out, offset + 4, tag);
  writeU32(out, offset + 8, length);
}

/** Reads and validates the header at `bytes[offset..offset+12)`; throws ProtocolError. */
export function decodeHeader(bytes: Uint8Array, offset: number, limits: FrameLimits): FrameHeader {
  if (bytes.length - offset < kHeaderBytes) {
    throw new ProtocolError(`truncated frame header: ${bytes.length - offset} of ${kHeaderBytes} bytes`);
  }
  const magic = bytes[offset] as number;
  if (magic !== kFrameMagic) {
    throw new ProtocolError(`bad frame magic 0x${hex(magic)} (expected 0x${hex(kFrameMagic)})`);
  }
  const kind = bytes[offset + 1] as number;
  const flags = (bytes[offset + 2] as number) | ((bytes[offset + 3] as number) << 8);
  const tag = readU32(bytes, offset + 4);
  const length = readU32(bytes, offset + 8);
  if (flags !== 0) throw new ProtocolError(`unknown frame flags 0x${hex(flags)}`);
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
  if (kind === kKindSharedData) {
    if (length !== kSharedDescriptorBytes) throw new ProtocolError(`shared data frame of ${length} bytes (tag ${tag})`);
    return { kind, tag, length };
  }
  if (kind === kKindLink) {
    if (!linkLengthValid(tag, length)) {
      throw new ProtocolError(`bad link frame: message ${tag} with ${length} bytes`);
    }
    return { kind, tag, length };
  }
  throw new ProtocolError(`unknown frame kind ${kind}`);
}

function linkLengthValid(message: number, length: number): boolean {
  switch (message) {
    case kLinkNotice:
      return length >= 4 && length <= kMaxLinkBytes;
    case kLinkShmOffer:
      return length > 24 && length <= kMaxLinkBytes;
    case kLinkShmCredit:
      return length >= 4 && length <= kMaxLinkBytes && length % 4 === 0;
    case kLinkHeartbeat:
    case kLinkBye:
    case kLinkPing:
    case kLinkShmAccept:
    case kLinkShmDecline:
      return length === 0;
    default:
      return false;
  }
}

export function readU32(bytes: Uint8Array, offset: number): number {
  return (
    ((bytes[offset] as number) |
      ((bytes[offset + 1] as number) << 8) |
      ((bytes[offset + 2] as number) << 16) |
      ((bytes[offset + 3] as number) << 24)) >>>
    0
  );
}

export function writeU32(bytes: Uint8Array, offset: number, value: number): void {
  bytes[offset] = value & 0xff;
  bytes[offset + 1] = (value >>> 8) & 0xff;
  bytes[offset + 2] = (value >>> 16) & 0xff;
  bytes[offset + 3] = (value >>> 24) & 0xff;
}

function hex(value: number): string {
  return value.toString(16).padStart(2, '0');
}
