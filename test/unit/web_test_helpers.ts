/**
 * N ranks of the web backend in one process over loopback WebSockets, for the contract and the
 * web tests: a TcpStoreServer as the store (what ringrun hosts for a web job), every rank built
 * through createWebBackend with Node's openers, wrapped to record the channels each rank dials so
 * that a test can cut a link (terminate the WebSocket, as a crash or a cut would).
 */
import { randomBytes } from 'node:crypto';
import type { WebSocket } from 'ws';
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { Logger } from '../../src/core/logger.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { ChannelPort, type ChannelTraits, whenOpen } from '../../src/rendezvous/channel.js';
import type { StoreAddress } from '../../src/rendezvous/store.js';
import { TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import type { BackendFactory, TransportHandle } from '../../src/transport/backend.js';
import { createWebBackend } from '../../src/transport/web/index.js';
import { kWebSocketLink } from '../../src/transport/web/mesh.js';
import { listen, nodeOpeners } from '../../src/transport/web/node_openers.js';
import type { LinkOpeners } from '../../src/transport/web/openers.js';
import { WebTransport, type WebTransportOptions } from '../../src/transport/web/web_transport.js';

export const kSilent = new Logger('[web]', 'error', () => {});

/** The launcher's part of a web job: a TcpStoreServer with the job's secret. */
export async function startStore(secret?: string): Promise<{ address: StoreAddress; close(): Promise<void> }> {
  const server = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: new JobKey(secret) });
  const address = await server.listen();
  return { address, close: () => server.close() };
}

/** Node's openers, recording every channel a rank dials (with the URL) and every listener's URL. */
export class ChannelLog {
  readonly urls = new Map<string, number>();
  readonly dialed: Array<{ rank: number; url: string; socket: WebSocket }> = [];

  openers(rank: number, base: LinkOpeners = nodeOpeners()): LinkOpeners {
    const listen = base.listen;
    return {
      ...base,
      ...(listen === undefined
        ? {}
        : {
            listen: async (host: string) => {
              const listener = await listen(host);
              this.urls.set(listener.url, rank);
              return listener;
            },
          }),
      dial: (url) => {
        const channel = base.dial(url);
        this.dialed.push({ rank, url, socket: channel as unknown as WebSocket });
        return channel;
      },
    };
  }

  /** Terminates the WebSocket between ranks a and b (no close handshake: both ends see it drop). */
  cut(a: number, b: number): void {
    const link = this.dialed.find(({ rank, url }) => {
      const other = this.urls.get(url);
      return (rank === a && other === b) || (rank === b && other === a);
    });
    if (link === undefined) throw new Error(`no WebSocket between ranks ${a} and ${b}`);
    link.socket.terminate();
  }
}

export interface WebWorld {
  handles: TransportHandle[];
  log: ChannelLog;
  close(): Promise<void>;
}

/** Every rank of a job of `size` through the web backend, concurrently, as separate processes would. */
export async function makeWebWorld(
  size: number,
  options: InitOptions = {},
  openersOf?: (rank: number, log: ChannelLog) => LinkOpeners,
): Promise<WebWorld> {
  const secret = options.secret ?? 'web test secret';
  const store = await startStore(secret);
  const log = new ChannelLog();
  const jobId = randomBytes(6).toString('hex');
  const factory: BackendFactory = (config, logger) =>
    createWebBackend(openersOf ? openersOf(config.rank, log) : log.openers(config.rank))(config, logger);
  const configs = Array.from({ length: size }, (_, rank) =>
    resolveConfig(
      {
        rank,
        size,
        backend: 'web',
        storeAddress: `127.0.0.1:${store.address.port}`,
        jobId,
        startTimeoutMs: 10_000,
        logLevel: 'error',
        ...options,
        secret,
      },
      {},
    ),
  );
  let handles: TransportHandle[];
  try {
    handles = await Promise.all(configs.map((config) => factory(config, kSilent)));
  } finally {
    // The store is needed only to connect (no rank holds it afterwards).
    await store.close();
  }
  return {
    handles,
    log,
    close: async () => {
      await Promise.all(handles.map((h) => h.close()));
    },
  };
}

/** Two ends of one loopback WebSocket, as ChannelPorts: the listener's side and the dialer's. */
export async function wsPair(): Promise<{ server: ChannelPort; client: ChannelPort; sockets: [WebSocket, WebSocket] }> {
  const listener = await listen('127.0.0.1');
  const accepted = new Promise<[ChannelPort, WebSocket]>((resolve) =>
    listener.onChannel((channel) => resolve([new ChannelPort(channel), channel as unknown as WebSocket])),
  );
  const dialed = nodeOpeners().dial(listener.url);
  const client = new ChannelPort(dialed);
  await whenOpen(dialed, performance.now() + 5000, 'the test socket');
  const [server, serverSocket] = await accepted;
  await listener.close();
  return { server, client, sockets: [serverSocket, dialed as unknown as WebSocket] };
}

export interface PairOptions extends Partial<WebTransportOptions> {
  chunkBytes?: number;
  highWaterBytes?: number;
  traits?: ChannelTraits;
}

/** Ranks 0 and 1 of a WebTransport over one loopback WebSocket (rank 0 the listener), no handshake. */
export async function transportPair(options: PairOptions = {}): Promise<{
  transports: [WebTransport, WebTransport];
  sockets: [WebSocket, WebSocket];
  close(): Promise<void>;
}> {
  const { server, client, sockets } = await wsPair();
  const link = (peer: number, port: ChannelPort) => ({
    peer,
    port,
    address: `test socket to rank ${peer}`,
    chunkBytes: options.chunkBytes ?? kWebSocketLink.chunkBytes,
    highWaterBytes: options.highWaterBytes ?? kWebSocketLink.highWaterBytes,
    traits: options.traits ?? { sendsSharedViews: true, retainsSentBytes: true, sendCallback: true },
  });
  const transportOptions: WebTransportOptions = { ioTimeoutMs: 10_000, ...options };
  const transports: [WebTransport, WebTransport] = [
    new WebTransport(0, 2, [link(1, server)], transportOptions),
    new WebTransport(1, 2, [link(0, client)], transportOptions),
  ];
  return {
    transports,
    sockets,
    close: async () => {
      await Promise.all(transports.map((t) => t.close()));
    },
  };
}
