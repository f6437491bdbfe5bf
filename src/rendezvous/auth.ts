/**
 * Shared-secret authentication of every connection of a job: the store's and the mesh's.
 *
 * How it works: both ends send a fresh random nonce, then each proves it knows the job secret
 * by sending HMAC-SHA256(secret, transcript), where the transcript is a label naming the
 * protocol and the prover's role, followed by the context (job id, ranks, both nonces), each
 * part length-prefixed so no two transcripts share bytes. Neither side ever sends the secret.
 * A proof cannot be replayed on another connection (the nonces differ) nor reflected back as
 * the other role's proof (the label differs). Proofs are compared in constant time.
 *
 * A job without a secret (RINGREDUCE_SECRET unset, e.g. a job started by hand) runs the same
 * exchange with an empty key: the protocol stays one, and a peer that does have a secret
 * refuses such a connection, but it proves nothing; docs/env.md says so.
 */
import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';

export const kNonceBytes = 32;
export const kMacBytes = 32;

/** The key of one job. The secret lives in a private field, so it never shows in a log of the object. */
export class JobKey {
  readonly #key: KeyObject | null;

  constructor(secret: string | undefined) {
    this.#key = secret === undefined || secret === '' ? null : createSecretKey(Buffer.from(secret, 'utf8'));
  }

  /** Whether a real secret is set (false: the empty key). */
  get authenticated(): boolean {
    return this.#key !== null;
  }

  /** HMAC-SHA256 of the transcript `label, ...parts`. */
  mac(label: string, ...parts: readonly Uint8Array[]): Buffer {
    const hmac = createHmac('sha256', this.#key ?? Buffer.alloc(0));
    const length = Buffer.allocUnsafe(4);
    for (const part of [Buffer.from(label, 'utf8'), ...parts]) {
      length.writeUInt32LE(part.byteLength, 0);
      hmac.update(length);
      hmac.update(part);
    }
    return hmac.digest();
  }

  /** Whether `proof` is the MAC of the transcript, compared in constant time. */
  verify(proof: Uint8Array, label: string, ...parts: readonly Uint8Array[]): boolean {
    const expected = this.mac(label, ...parts);
    return proof.byteLength === expected.byteLength && timingSafeEqual(proof, expected);
  }
}

export function newNonce(): Buffer {
  return randomBytes(kNonceBytes);
}

/** A u32 as 4 little-endian bytes, for transcripts. */
export function u32Bytes(value: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32LE(value >>> 0, 0);
  return out;
}
