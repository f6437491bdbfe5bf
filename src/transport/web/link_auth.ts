/**
 * The job secret with WebCrypto (`globalThis.crypto.subtle`, in Node 20 and every browser): the
 * proofs of rendezvous/auth.ts, computed asynchronously, so the same code authenticates a link
 * in a browser rank.
 *
 * The MACs are byte for byte those of auth.ts's JobKey: HMAC-SHA256 over a label and parts,
 * each prefixed with its u32 little-endian length. A job without a secret uses the empty key;
 * WebCrypto refuses a zero-length HMAC key, so it is given one zero byte, which HMAC pads to
 * the same block of zeros as the empty key (RFC 2104): the same MAC. Verification is
 * WebCrypto's own `verify`, which compares in constant time.
 */

export const kNonceBytes = 32;
export const kMacBytes = 32;

const kUtf8 = new TextEncoder();

// Derived from the global, so that neither the DOM lib nor Node's types need to be named.
type Subtle = (typeof globalThis.crypto)['subtle'];
type Key = Awaited<ReturnType<Subtle['importKey']>>;

/** The key of one job, imported once. The secret is not kept: only the non-extractable CryptoKey. */
export class WebJobKey {
  private constructor(
    private readonly key: Key,
    /** Whether a real secret is set (false: the empty key). */
    readonly authenticated: boolean,
  ) {}

  static async create(secret: string | undefined): Promise<WebJobKey> {
    const authenticated = secret !== undefined && secret !== '';
    const raw = authenticated ? kUtf8.encode(secret) : new Uint8Array(1);
    const key = await subtle().importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    return new WebJobKey(key, authenticated);
  }

  /** HMAC-SHA256 of the transcript `label, ...parts`. */
  async mac(label: string, ...parts: readonly Uint8Array[]): Promise<Uint8Array> {
    return new Uint8Array(await subtle().sign('HMAC', this.key, transcript(label, parts)));
  }

  /** Whether `proof` is the MAC of the transcript (constant time). */
  verify(proof: Uint8Array, label: string, ...parts: readonly Uint8Array[]): Promise<boolean> {
    if (proof.byteLength !== kMacBytes) return Promise.resolve(false);
    // A copy: WebCrypto takes no view of memory that may be shared.
    return subtle().verify('HMAC', this.key, proof.slice(), transcript(label, parts));
  }
}

export function newNonce(): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(kNonceBytes));
}

/** A u32 as 4 little-endian bytes, for transcripts. */
export function u32Bytes(value: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value >>> 0, true);
  return out;
}

function transcript(label: string, parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  const all = [kUtf8.encode(label), ...parts];
  const out = new Uint8Array(all.reduce((sum, part) => sum + 4 + part.byteLength, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const part of all) {
    view.setUint32(at, part.byteLength, true);
    out.set(part, at + 4);
    at += 4 + part.byteLength;
  }
  return out;
}

function subtle(): Subtle {
  const crypto = globalThis.crypto;
  if (crypto?.subtle === undefined) {
    // Browsers expose WebCrypto only to secure contexts (https, or localhost).
    throw new Error('WebCrypto (crypto.subtle) is not available here: serve the page over https or from localhost');
  }
  return crypto.subtle;
}
