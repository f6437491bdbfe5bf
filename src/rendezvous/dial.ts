/**
 * Outgoing TCP (or Unix socket) connections with retry until a deadline. The store client
 * needs it because rank 0's server may come up after the other ranks start; the mesh uses it
 * so a peer whose accept backlog overflows briefly does not fail the job.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import { ProtocolError, TimeoutError } from '../core/errors.js';
import { kTlsHint, type TlsLinks } from './tls_links.js';

/** Errors that mean "not reachable yet": worth another try before the deadline. */
const kRetryable = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  // A name not (yet) in DNS: a Kubernetes pod's name appears in its headless Service's DNS
  // only once the pod runs, and the peers may start first.
  'ENOTFOUND',
]);
/**
 * For a Unix socket only a full backlog is worth waiting for. Anything else (no file, no
 * listener, no permission) will not heal: the mesh falls back to TCP at once.
 */
const kRetryableLocal = new Set(['EAGAIN']);
const kFirstBackoffMs = 20;
const kMaxBackoffMs = 250;

export interface DialOptions {
  host: string;
  port: number;
  /** Dial this Unix socket instead of host:port. */
  path?: string;
  /** Absolute deadline on the performance.now() clock. */
  deadline: number;
  /** What is being dialed, for error messages ("the store", "rank 3"). */
  what: string;
  /** Installed on every attempt's socket; see mesh.ts for why the receive side needs it. */
  onread?: net.OnReadOpts;
  /** Aborting stops the retries and destroys a socket still connecting. */
  signal?: AbortSignal;
  /** Run TLS over the TCP connection (not over a Unix socket); resolves once it is established. */
  tls?: TlsLinks;
}

/**
 * Resolves with a connected socket (no-delay set on TCP). Rejects with TimeoutError naming the target
 * and the last error when the deadline passes, or with the raw error when it is not retryable.
 */
export async function dial(options: DialOptions): Promise<net.Socket> {
  let backoff = kFirstBackoffMs;
  let lastError = 'no attempt made';
  const target = options.path ?? `${options.host}:${options.port}`;
  const retryable = options.path === undefined ? kRetryable : kRetryableLocal;
  for (;;) {
    options.signal?.throwIfAborted();
    const remaining = options.deadline - performance.now();
    if (remaining <= 0) {
      throw new TimeoutError(`could not connect to ${options.what} at ${target} before the deadline (last error: ${lastError})`);
    }
    try {
      return await attempt(options, remaining);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      if (!retryable.has(code)) throw error;
      lastError = code;
    }
    const pause = Math.min(backoff, options.deadline - performance.now());
    if (pause > 0) await sleep(pause, options.signal);
    backoff = Math.min(backoff * 2, kMaxBackoffMs);
  }
}

function attempt(options: DialOptions, remainingMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    // Unix sockets have no Nagle to turn off.
    const connectOptions: net.NetConnectOpts =
      options.path === undefined ? { host: options.host, port: options.port, noDelay: true } : { path: options.path };
    // Also on a Unix socket: net.connect gives its pipe handle the user buffer like a TCP one.
    if (options.onread) connectOptions.onread = options.onread;
    const secure = options.tls !== undefined && options.path === undefined ? options.tls : undefined;
    // tls.connect honours `onread` too (Node 20): the plaintext lands in the sink's buffers.
    const socket: net.Socket = secure
      ? tls.connect({ ...(connectOptions as net.TcpNetConnectOpts), ...secure.clientOptions() })
      : net.connect(connectOptions);
    // Set once TCP is up: an error after it is the TLS handshake's, which no retry heals.
    let connected = false;
    if (secure) {
      socket.once('connect', () => {
        connected = true;
      });
    }
    // A SYN into a black hole would otherwise hang for minutes.
    const timer = setTimeout(() => {
      socket.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' }));
    }, remainingMs);
    const onAbort = () => socket.destroy(options.signal?.reason as Error);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const onError = (error: Error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      reject(connected ? tlsFailure(options, error) : error);
    };
    socket.once('error', onError);
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.off('error', onError);
      if (options.path === undefined) socket.setNoDelay(true);
      resolve(socket);
    });
  });
}

function tlsFailure(options: DialOptions, error: Error): ProtocolError {
  const code = (error as NodeJS.ErrnoException).code;
  return new ProtocolError(
    `TLS handshake with ${options.what} at ${options.host}:${options.port} failed: ${code ?? error.message} (${kTlsHint})`,
  );
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
