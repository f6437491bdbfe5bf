/**
 * TLS for a job's TCP connections (mesh links and the store), keyed from the job secret, so
 * no certificate files exist: TLS 1.3 with an external pre-shared key (RFC 8446 §2.2).
 *
 * - Key: HKDF-SHA256 of the secret (RINGREDUCE_SECRET) with the job id as salt and a fixed
 *   label as info, 32 bytes. A leaked PSK of one job says nothing about another's secret.
 * - Identity: the job id. The server refuses any other, and any peer whose key differs fails
 *   the PSK binder check, so the handshake itself authenticates both ends; the HMAC handshake
 *   (auth.ts) still runs inside, unchanged.
 * - Version and suite: TLS 1.3 only, TLS_AES_128_GCM_SHA256. Node 20's `pskCallback` (OpenSSL's
 *   TLS ≤ 1.2 PSK callback) also serves TLS 1.3 there: OpenSSL turns the key into a resumption-
 *   style PSK bound to SHA-256, so only the SHA-256 suites (AES-128-GCM, ChaCha20-Poly1305) can
 *   be negotiated; AES-GCM runs on AES-NI. TLS 1.3's psk_dhe_ke mode adds an ECDHE exchange, so
 *   recorded traffic stays secret even if the job secret leaks later (forward secrecy), which
 *   the TLS 1.2 plain-PSK suites lack; the TLS 1.2 ECDHE-PSK suites offer only CBC or ChaCha20.
 *
 * Local links (Unix sockets, the shared-memory lane) never leave the host and stay as they are.
 */
import { hkdfSync } from 'node:crypto';
import type net from 'node:net';
import tls from 'node:tls';
import { kEnv } from '../core/env_names.js';
import { InvalidArgumentError } from '../core/errors.js';

const kLabel = 'ringreduce tls-psk v1';
const kPskBytes = 32;
const kVersion = 'TLSv1.3';
/** The TLS 1.3 suites a SHA-256 PSK allows, AES-GCM (AES-NI) first. */
const kCiphers = 'TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256';

/** What to add to a failed TLS handshake's message: the likely causes, by setting. */
export const kTlsHint = `is ${kEnv.tls} set alike on every rank, with the same ${kEnv.secret}?`;

/** The TLS settings of one job. The key lives in a private field, so it never shows in a log. */
export class TlsLinks {
  readonly #psk: Buffer;
  readonly identity: string;

  private constructor(psk: Buffer, identity: string) {
    this.#psk = psk;
    this.identity = identity;
  }

  /** Throws InvalidArgumentError without a secret: TLS keyed from nothing would protect nothing. */
  static fromSecret(secret: string | undefined, jobId: string): TlsLinks {
    if (secret === undefined || secret === '') {
      throw new InvalidArgumentError(
        `${kEnv.tls} (ringrun --tls) needs the job secret ${kEnv.secret} to key the TLS links (ringrun sets it; a job started by hand must set it on every rank)`,
      );
    }
    const psk = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.from(jobId, 'utf8'), kLabel, kPskBytes));
    return new TlsLinks(psk, jobId);
  }

  /** Options for `tls.connect` (the caller adds host, port, onread). */
  clientOptions(): tls.ConnectionOptions {
    return {
      minVersion: kVersion,
      maxVersion: kVersion,
      ciphers: kCiphers,
      // No certificate to check: the PSK binder proves the server's key. No SNI either.
      checkServerIdentity: () => undefined,
      servername: '',
      pskCallback: () => ({ psk: this.#psk, identity: this.identity }),
    };
  }

  /** Wraps an accepted TCP socket as the server end; its 'data' is the plaintext. */
  accept(socket: net.Socket): tls.TLSSocket {
    const secure = new tls.TLSSocket(socket, {
      isServer: true,
      secureContext: tls.createSecureContext({ minVersion: kVersion, maxVersion: kVersion, ciphers: kCiphers }),
      // A client of another job (another identity) gets no key, and the handshake fails.
      pskCallback: (_socket: tls.TLSSocket, identity: string) => (identity === this.identity ? this.#psk : null),
    } as tls.TLSSocketOptions);
    // Nagle stays off on the raw socket; the TLS socket writes through it.
    return secure;
  }
}
