/**
 * Watches a job's rendezvous from the launcher, for the progress line and start_up.ts: connects
 * to rank 0's store as one more authenticated client and waits, server-side (no polling), for
 * each rank's address key (it called init()), each rank's barrier mark (it connected to every
 * other) and the barrier's completion key (rendezvous/mesh.ts, mesh_barrier.ts). Best effort:
 * a store the launcher cannot reach (rank 0 on a network the launcher is not on, or a command
 * that never calls init()) only means that nothing is known of the ranks' init().
 */
import { createServer } from 'node:net';
import { TimeoutError } from '../core/errors.js';
import { JobKey } from '../rendezvous/auth.js';
import { meshKeyPrefix } from '../rendezvous/mesh.js';
import { TcpStoreClient } from '../rendezvous/tcp_store.js';
import { TlsLinks } from '../rendezvous/tls_links.js';

export interface StoreWatchOptions {
  host: string;
  port: number;
  jobId: string;
  secret: string | undefined;
  /** The ranks run TLS (RINGREDUCE_TLS): so must our connection to rank 0's store. */
  tls: boolean;
  size: number;
  timeoutMs: number;
  signal: AbortSignal;
  /** Connected to the store. */
  onStore(): void;
  /** `rank` called init(): its address is in the store. */
  onPublished(rank: number): void;
  /** `rank` connected to every other rank. */
  onFinished(rank: number): void;
  onConnected(): void;
}

export class StoreWatch {
  private client: TcpStoreClient | undefined;
  private readonly prefix: string;
  private readonly stopped = new AbortController();

  constructor(private readonly options: StoreWatchOptions) {
    this.prefix = meshKeyPrefix(options.jobId);
  }

  /** Watches until the job is connected, the store goes away, the time is up or the signal aborts. Never rejects. */
  async run(): Promise<void> {
    const { options } = this;
    const signal = AbortSignal.any([options.signal, this.stopped.signal]);
    let client: TcpStoreClient;
    try {
      client = await TcpStoreClient.connect({
        host: options.host,
        port: options.port,
        connectTimeoutMs: options.timeoutMs,
        key: new JobKey(options.secret),
        signal,
        ...(options.tls ? { tls: TlsLinks.fromSecret(options.secret, options.jobId) } : {}),
      });
    } catch {
      return;
    }
    this.client = client;
    options.onStore();
    const close = () => void client.close();
    signal.addEventListener('abort', close, { once: true });
    try {
      const ranks = [...Array(options.size).keys()];
      const key = (name: string) => client.get(`${this.prefix}${name}`, options.timeoutMs);
      await Promise.all([
        ...ranks.map((rank) => key(`addr/${rank}`).then(() => options.onPublished(rank))),
        ...ranks.map((rank) => key(`ready/${rank}`).then(() => options.onFinished(rank))),
        key('all-ready').then(() => options.onConnected()),
      ]);
    } catch {
      // Timed out, or the store went away: the job itself reports what matters.
    } finally {
      signal.removeEventListener('abort', close);
      this.client = undefined;
      await client.close();
    }
  }

  /** Stops watching, and dialing the store (rank 0, which hosts it, is gone). */
  stop(): void {
    this.stopped.abort();
  }

  /** Whether `rank` called init() (its address is in the store); undefined when the store cannot be asked. */
  async calledInit(rank: number): Promise<boolean | undefined> {
    if (this.client === undefined) return undefined;
    try {
      await this.client.get(`${this.prefix}addr/${rank}`, 0);
      return true;
    } catch (error) {
      return error instanceof TimeoutError ? false : undefined;
    }
  }
}

/**
 * After rank 0 (which hosts the store) exited before the launcher reached its store: listens on
 * the store's address and resolves true when a rank dials it (that rank is in init(), waiting for
 * rank 0's store), false when the port cannot be taken or `signal` aborts. The connection is
 * closed unanswered; the rank's own dial retries until its deadline.
 */
export function rankDialsStore(host: string, port: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer((socket) => {
      socket.destroy();
      done(true);
    });
    const onAbort = () => done(false);
    function done(dialed: boolean): void {
      signal.removeEventListener('abort', onAbort);
      server.close();
      resolve(dialed);
    }
    server.once('error', () => done(false));
    if (signal.aborted) return done(false);
    signal.addEventListener('abort', onAbort, { once: true });
    server.listen(port, host);
  });
}
