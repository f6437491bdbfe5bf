/** The payload of a kLinkNotice frame (framing.ts): u32 rank of the failed peer, then a UTF-8 reason. */
import { ProtocolError } from '../../core/errors.js';
import { kMaxLinkBytes } from './framing.js';

const kUtf8 = new TextDecoder('utf-8', { fatal: false });

export interface Notice {
  rank: number;
  reason: string;
}

export function encodeNotice(rank: number, reason: string): Buffer {
  let text = Buffer.from(reason, 'utf8');
  if (text.byteLength > kMaxLinkBytes - 4) {
    // Cut on a character boundary: decode what fits (a broken last character becomes U+FFFD) and drop that.
    text = Buffer.from(kUtf8.decode(text.subarray(0, kMaxLinkBytes - 8)).replace(/\uFFFD$/, ''), 'utf8');
  }
  const out = Buffer.allocUnsafe(4 + text.byteLength);
  out.writeUInt32LE(rank >>> 0, 0);
  text.copy(out, 4);
  return out;
}

/** Decodes a notice; the header check (framing.ts) already bounded its length. */
export function decodeNotice(payload: Uint8Array, size: number): Notice {
  if (payload.byteLength < 4) throw new ProtocolError(`notice of ${payload.byteLength} bytes`);
  const bytes = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  const rank = bytes.readUInt32LE(0);
  if (rank >= size) throw new ProtocolError(`notice names rank ${rank}, outside a job of size ${size}`);
  return { rank, reason: kUtf8.decode(bytes.subarray(4)) };
}
