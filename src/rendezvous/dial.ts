/**
 * Outgoing TCP connections with retry until a deadline. The store client needs it because
 * rank 0's server may come up after the other ranks start; the mesh uses it so a peer whose
 * accept backlog overflows briefly does not fail the job.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { TimeoutError } from '../api/errors.js';

/** Errors that mean "not reachable yet": worth another try before the deadline. */
const kRetryable = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
const kFirstBackoffMs = 20;
const kMaxBackoffMs = 250;

export interface DialOptions {
  host: string;
  port: number;
  /** Absolute deadline on the performance.now() clock. */
  deadline: number;
  /** What is being dialed, for error messages ("the store", "rank 3"). */
  what: string;
  /** Installed on every attempt's socket; see mesh.ts for why the receive side needs it. */
  onread?: net.OnReadOpts;
  /** Aborting stops the retries and destroys a socket still connecting. */
  signal?: AbortSignal;
}

/**
 * Resolves with a connected socket (no-delay set). Rejects with TimeoutError naming the target
 * and the last error when the deadline passes, or with the raw error when it is not retryable.
 */
export async function dial(options: DialOptions): Promise<net.Socket> {
  let backoff = kFirstBackoffMs;
  let lastError = 'no attempt made';
  for (;;) {
    options.signal?.throwIfAborted();
    const remaining = options.deadline - performance.now();
    if (remaining <= 0) {
      throw new TimeoutError(
        `could not connect to ${options.what} at ${options.host}:${options.port} before the deadline (last error: ${lastError})`,
      );
    }
    try {
      return await attempt(options, remaining);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      if (!kRetryable.has(code)) throw error;
      lastError = code;
    }
    const pause = Math.min(backoff, options.deadline - performance.now());
    if (pause > 0) await sleep(pause, options.signal);
    backoff = Math.min(backoff * 2, kMaxBackoffMs);
  }
}

function attempt(options: DialOptions, remainingMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const connectOptions: net.NetConnectOpts = { host: options.host, port: options.port, noDelay: true };
    if (options.onread) connectOptions.onread = options.onread;
    const socket = net.connect(connectOptions);
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
      reject(error);
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.off('error', onError);
      socket.setNoDelay(true);
      resolve(socket);
    });
  });
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
