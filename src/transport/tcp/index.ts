/**
 * The TCP backend, assembled: rendezvous through the store (rank 0 hosts it), full-mesh
 * connect, then a TcpTransport over the sockets. One deadline (timeouts.connectMs) covers
 * reaching the store and completing the mesh. Every connection, store and mesh, proves
 * knowledge of the job secret; refused strangers are logged and the job goes on. With `tls`
 * the TCP connections are encrypted too (rendezvous/tls_links.ts).
 *
 * Addresses. The data listener binds `bindHost` and is advertised as `advertiseHost`:
 * - a network interface (RINGREDUCE_NETWORK_INTERFACE): its first IPv4 address, for both;
 * - else an address (RINGREDUCE_ADDRESS): for both;
 * - else, when the store is on a loopback address (a one-machine job): that address;
 * - else: bind every interface and advertise the local address of our connection to the store,
 *   i.e. the one that routes to rank 0. This never advertises a loopback address to a peer on
 *   another host.
 * Rank 0's store binds the store address itself when it is an IP address, and every interface
 * when it is a host name (a name may resolve to 127.0.1.1 locally, where no peer can reach it).
 *
 * `tcpBackend` is the backend factory (../backend.ts): the job's Config mapped onto a
 * TcpTransportConfig (`tcpTransportConfig`), then createTcpTransport.
 */
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Config } from '../../core/config.js';
import { InvalidArgumentError } from '../../core/errors.js';
import { interfaceAddress, isLoopback, isWildcard } from '../../rendezvous/addresses.js';
import { JobKey } from '../../rendezvous/auth.js';
import { connectMesh, destroyLinks, type PeerLink } from '../../rendezvous/mesh.js';
import type { StoreAddress } from '../../rendezvous/store.js';
import { TcpStoreClient, TcpStoreServer } from '../../rendezvous/tcp_store.js';
import { TlsLinks } from '../../rendezvous/tls_links.js';
import type { BackendFactory, TransportHandle } from '../backend.js';
import type { ShmLaneOptions } from './shm_lane.js';
import { TcpTransport } from './tcp_transport.js';

export { TcpTransport, type TcpTransportOptions } from './tcp_transport.js';

export interface TcpTransportConfig {
  rank: number;
  size: number;
  /** Where rank 0's store listens; every rank gets it from the launcher's environment. */
  storeAddress: StoreAddress;
  /** True on the rank that starts the store server (rank 0). */
  hostStore: boolean;
  /** Who hosts the store ("rank 0", "ringrun"), named when it goes away during start-up. */
  storeOwner?: string;
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
  /** Bind to and advertise this interface's IPv4 address (e.g. "eth0"); wins over bindHost. */
  networkInterface?: string;
  /** Identifies the job in the handshake, so a stale process of another job is refused. */
  jobId: string;
  /** The job secret (RINGREDUCE_SECRET); never logged, never sent. Unset: the empty key. */
  secret?: string;
  timeouts: { connectMs: number; ioMs: number };
  /** Ping interval while collectives are pending (../liveness.ts); 0 turns pings off. Default 0. */
  heartbeatMs?: number;
  /** Ranks on the same host (and network namespace) connect over Unix domain sockets. Default true. */
  localSockets?: boolean;
  /**
   * TLS keyed from `secret` (rendezvous/tls_links.ts) on every TCP mesh link and, with `store`,
   * on the connections to the store. Unset: plain TCP. Requires `secret`.
   */
  tls?: { store: boolean };
  maxFrameBytes?: number;
  /** Large data messages between ranks of one host go through files in tmpfs (shm_lane.ts); unset: the sockets carry all. */
  sharedMemory?: ShmLaneOptions;
  /** Where refused connections and other link events are reported. */
  log?: { warn(message: string): void; info(message: string): void };
}

export interface TcpTransportHandle extends TransportHandle {
  readonly transport: TcpTransport;
  /** Closes the transport, then the store server if this rank hosts it. Idempotent. */
  close(): Promise<void>;
}

/** The TCP backend: rendezvous through rank 0's store, then the mesh, as `config` says. */
export const tcpBackend: BackendFactory = (config, log) => createTcpTransport(tcpTransportConfig(config, log));

/**
 * The shared-memory lane's slots (shm_lane.ts): one per pipelined segment in flight, so the ring
 * never waits for a slot. The algorithms' default pipeline depth (algorithms/options.ts,
 * kDefaultPipelineDepth), which the transport cannot import (imports point down); a test keeps
 * the two equal.
 */
export const kLaneSlots = 4;
/** Below this a socket write costs less than the lane's copy in, copy out and credit. */
const kLaneMinBytes = 64 * 1024;

/** The TCP settings of a job's configuration (docs/env.md). */
export function tcpTransportConfig(config: Config, log?: TcpTransportConfig['log']): TcpTransportConfig {
  return {
    rank: config.rank,
    size: config.size,
    storeAddress: { host: config.storeHost, port: config.storePort },
    // Elastic jobs meet at the launcher's store, which outlives every rank.
    hostStore: config.rank === 0 && config.elasticWorker === undefined,
    storeOwner: config.elasticWorker === undefined ? 'rank 0' : 'ringrun',
    // Unset, the transport binds to the store's interface and advertises the one routing to rank 0.
    ...(config.address === undefined ? {} : { bindHost: config.address, advertiseHost: config.address }),
    ...(config.networkInterface === undefined ? {} : { networkInterface: config.networkInterface }),
    jobId: config.jobId,
    ...(config.secret === undefined ? {} : { secret: config.secret }),
    timeouts: { connectMs: config.startTimeoutMs, ioMs: config.ioTimeoutMs },
    heartbeatMs: config.heartbeatMs,
    localSockets: config.unixSockets,
    // An elastic job's store is the launcher's, which speaks no TLS: its rendezvous runs
    // inside the launcher's host, and the data links are the ones that cross hosts.
    ...(config.tls ? { tls: { store: config.elasticWorker === undefined } } : {}),
    // A slot holds one segment: the largest message the pipelined algorithms send.
    ...(config.sharedMemory
      ? { sharedMemory: { dir: '/dev/shm', slots: kLaneSlots, slotBytes: config.segmentBytes, minBytes: kLaneMinBytes } }
      : {}),
    ...(log === undefined ? {} : { log }),
  };
}

export async function createTcpTransport(config: TcpTransportConfig): Promise<TcpTransportHandle> {
  const { rank, size, storeAddress, jobId, timeouts } = config;
  if (!(timeouts.connectMs > 0)) throw new InvalidArgumentError(`timeouts.connectMs must be positive, got ${timeouts.connectMs}`);
  const transportOptions = {
    ioTimeoutMs: timeouts.ioMs,
    maxFrameBytes: config.maxFrameBytes,
    shareFate: true,
    heartbeatMs: config.heartbeatMs ?? 0,
    ...(config.sharedMemory === undefined ? {} : { sharedMemory: config.sharedMemory }),
    ...(config.log === undefined ? {} : { warn: (message: string) => config.log?.warn(message) }),
  };
  if (size === 1) return handle(new TcpTransport(rank, size, [], transportOptions), null);

  const deadline = performance.now() + timeouts.connectMs;
  const nic = config.networkInterface === undefined ? undefined : interfaceAddress(config.networkInterface);
  const bindHost = nic ?? config.bindHost ?? (isLoopback(storeAddress.host) ? storeAddress.host : '0.0.0.0');
  const key = new JobKey(config.secret);
  const tls = config.tls === undefined ? undefined : TlsLinks.fromSecret(config.secret, jobId);
  const storeTls = config.tls?.store === true ? tls : undefined;
  const log = config.log;
  if (!key.authenticated && rank === 0) {
    log?.warn('RINGREDUCE_SECRET is not set: connections are not authenticated (ringrun sets it; see docs/env.md)');
  }
  let server: TcpStoreServer | null = null;
  let client: TcpStoreClient | null = null;
  let links: PeerLink[] = [];
  try {
    if (config.hostStore) {
      server = new TcpStoreServer({
        host: storeBindHost(storeAddress.host),
        port: storeAddress.port,
        key,
        onRefused: (remote, reason) => log?.warn(`store: refused a connection from ${remote}: ${reason}`),
        onProtocolError: (error, remote) => log?.warn(`store: closed a connection from ${remote}: ${error.message}`),
        ...(storeTls === undefined ? {} : { tls: storeTls }),
      });
      await server.listen();
    }
    client = await TcpStoreClient.connect({
      ...storeAddress,
      connectTimeoutMs: timeouts.connectMs,
      // A store gone quiet fails start-up after the I/O timeout, naming the store, not a peer.
      silenceMs: timeouts.ioMs,
      ...(config.storeOwner === undefined ? {} : { hostedBy: config.storeOwner }),
      key,
      ...(storeTls === undefined ? {} : { tls: storeTls }),
    });
    const advertiseHost = nic ?? config.advertiseHost ?? (isWildcard(bindHost) ? client.localAddress : bindHost);
    if (!advertiseHost) throw new InvalidArgumentError('could not determine advertiseHost; pass it explicitly');
    links = await connectMesh({
      store: client,
      rank,
      size,
      host: bindHost,
      advertiseHost,
      jobId,
      key,
      localSockets: config.localSockets ?? true,
      ...(tls === undefined ? {} : { tls }),
      onRefused: (remote, reason) => log?.warn(`mesh: refused a connection from ${remote}: ${reason}`),
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
  if (server !== null) transport.alsoHold(server);
  let closing: Promise<void> | null = null;
  return {
    transport,
    close: () => {
      closing ??= transport.close().then(() => server?.close());
      return closing;
    },
  };
}

function storeBindHost(host: string): string {
  if (isIP(host) !== 0) return host;
  return isLoopback(host) ? '127.0.0.1' : '0.0.0.0';
}
