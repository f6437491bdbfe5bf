/**
 * The TCP backend, assembled: rendezvous through the store (rank 0 hosts it), full-mesh
 * connect, then a TcpTransport over the sockets. One deadline (timeouts.connectMs) covers
 * reaching the store and completing the mesh.
 */
import { performance } from 'node:perf_hooks';
import { InvalidArgumentError } from '../../api/errors.js';
import { connectMesh, destroyLinks, type PeerLink } from '../../rendezvous/mesh.js';
import type { StoreAddress } from '../../rendezvous/store.js';
import { TcpStoreClient, TcpStoreServer } from '../../rendezvous/tcp_store.js';
import { TcpTransport } from './tcp_transport.js';

export { TcpTransport, type TcpTransportOptions } from './tcp_transport.js';

export interface TcpTransportConfig {
  rank: number;
  size: number;
  /** Where rank 0's store listens; every rank gets it from the launcher's environment. */
  storeAddress: StoreAddress;
  /** True on the rank that starts the store server (rank 0). */
  hostStore: boolean;
  /**
   * Interface for the data listener (and the store server). Default: the store host when it
   * is a loopback address (a single-machine job), else "0.0.0.0".
   */
  bindHost?: string;
  /**
   * Host the peers dial to reach this rank. Default: `bindHost` unless it is a wildcard, else
   * the local address of our connection to the store, i.e. the interface that routes to rank 0.
   */
  advertiseHost?: string;
  /** Identifies the job in the handshake, so a stale process of another job is refused. */
  jobId: string;
  timeouts: { connectMs: number; ioMs: number };
  maxFrameBytes?: number;
}

export interface TcpTransportHandle {
  transport: TcpTransport;
  /** Closes the transport, then the store server if this rank hosts it. Idempotent. */
  close(): Promise<void>;
}

export async function createTcpTransport(config: TcpTransportConfig): Promise<TcpTransportHandle> {
  const { rank, size, storeAddress, jobId, timeouts } = config;
  if (!(timeouts.connectMs > 0)) throw new InvalidArgumentError(`timeouts.connectMs must be positive, got ${timeouts.connectMs}`);
  const transportOptions = { ioTimeoutMs: timeouts.ioMs, maxFrameBytes: config.maxFrameBytes };
  if (size === 1) return handle(new TcpTransport(rank, size, [], transportOptions), null);

  const deadline = performance.now() + timeouts.connectMs;
  const bindHost = config.bindHost ?? (isLoopback(storeAddress.host) ? storeAddress.host : '0.0.0.0');
  let server: TcpStoreServer | null = null;
  let client: TcpStoreClient | null = null;
  let links: PeerLink[] = [];
  try {
    if (config.hostStore) {
      server = new TcpStoreServer({ host: bindHost, port: storeAddress.port });
      await server.listen();
    }
    client = await TcpStoreClient.connect({ ...storeAddress, connectTimeoutMs: timeouts.connectMs });
    const advertiseHost = config.advertiseHost ?? (isWildcard(bindHost) ? client.localAddress : bindHost);
    if (!advertiseHost) throw new InvalidArgumentError('could not determine advertiseHost; pass it explicitly');
    links = await connectMesh({
      store: client,
      rank,
      size,
      host: bindHost,
      advertiseHost,
      jobId,
      timeoutMs: Math.max(1, deadline - performance.now()),
    });
    await client.close();
    return handle(new TcpTransport(rank, size, links, transportOptions), server);
  } catch (error) {
    destroyLinks(links);
    await client?.close();
    await server?.close();
    throw error;
  }
}

function handle(transport: TcpTransport, server: TcpStoreServer | null): TcpTransportHandle {
  let closing: Promise<void> | null = null;
  return {
    transport,
    close: () => {
      closing ??= transport.close().then(() => server?.close());
      return closing;
    },
  };
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
