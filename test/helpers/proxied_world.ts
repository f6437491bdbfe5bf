/**
 * N ranks in this thread, each a real Engine behind the public facade over the real TCP
 * transport, with a FaultProxy (fault_proxy.ts) on every connection: the test hosts the store
 * and hands each rank r a store that answers "where does rank j listen?" with the port of a
 * proxy of its own for the link r–j. A rank receives only on the connections it dials
 * (src/rendezvous/mesh.ts), so the connection r dials to j carries j's frames to r, in the
 * proxy's 'in' direction (from the target to the dialer): `link(j, r)` is that proxy.
 *
 * The transport is built with the job's settings (tcpTransportConfig: ioTimeoutMs, heartbeatMs
 * and the rest as a rank would have them) except that links are TCP even on one host: no Unix
 * sockets and no shared-memory lane, whose bytes no proxy could see. With `tls: true` (and a
 * `secret`) the mesh runs TLS, as a rank's would: the proxies then see only its records.
 */
import { RingReduce } from '../../src/api/runtime.js';
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { connectMesh } from '../../src/rendezvous/mesh.js';
import type { Store } from '../../src/rendezvous/store.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { TlsLinks } from '../../src/rendezvous/tls_links.js';
import { tcpTransportConfig } from '../../src/transport/tcp/index.js';
import { TcpTransport } from '../../src/transport/tcp/tcp_transport.js';
import { FaultProxy } from './fault_proxy.js';
import { LocalEngine } from './local_engine.js';
import { testEnv } from './test_env.js';

export interface ProxiedWorld {
  ranks: RingReduce[];
  /** The proxy that carries `from`'s frames to `to` (in its 'in' direction). */
  link(from: number, to: number): FaultProxy;
  /** Every proxy on a connection of `rank`, both ways. */
  linksOf(rank: number): FaultProxy[];
  /** Every proxy. */
  links(): FaultProxy[];
  /** Shuts every rank down (a failed rank's shutdown is not an error) and closes the proxies. */
  close(): Promise<void>;
}

/** `store`, except that rank addresses name the rank's proxy. */
function proxiedStore(store: Store, proxyOf: (peer: number, host: string, port: number) => Promise<number>): Store {
  return {
    set: (key, value) => store.set(key, value),
    add: (key, delta) => store.add(key, delta),
    close: () => store.close(),
    async get(key, timeoutMs) {
      const value = await store.get(key, timeoutMs);
      const rank = /addr\/(\d+)$/.exec(key)?.[1];
      if (rank === undefined) return value;
      const advertised = JSON.parse(Buffer.from(value).toString()) as { host: string; port: number };
      const port = await proxyOf(Number(rank), advertised.host, advertised.port);
      return Buffer.from(JSON.stringify({ host: '127.0.0.1', port }));
    },
  };
}

export async function startProxiedWorld(size: number, options: InitOptions = {}): Promise<ProxiedWorld> {
  const server = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
  const address = await server.listen();
  /** By `${dialer}-${target}`. */
  const proxies = new Map<string, Promise<FaultProxy>>();
  const proxyOf = (dialer: number) => async (target: number, host: string, port: number) => {
    const proxy = FaultProxy.start({ host, port });
    proxies.set(`${dialer}-${target}`, proxy);
    return (await proxy).port;
  };
  const configs = Array.from({ length: size }, (_, rank) =>
    resolveConfig(
      {
        rank,
        size,
        storeAddress: `127.0.0.1:${address.port}`,
        logLevel: 'error',
        ...options,
        unixSockets: false,
        sharedMemory: false,
      },
      testEnv(),
    ),
  );
  const clients = await Promise.all(configs.map(() => TcpStoreClient.connect({ ...address, connectTimeoutMs: 5000 })));
  try {
    const links = await Promise.all(
      clients.map((client, rank) => {
        const config = configs[rank];
        return connectMesh({
          store: proxiedStore(client, proxyOf(rank)),
          rank,
          size,
          host: '127.0.0.1',
          jobId: 'faults',
          key: new JobKey(config?.secret),
          ...(config?.tls ? { tls: TlsLinks.fromSecret(config.secret, 'faults') } : {}),
          localSockets: false,
          timeoutMs: 10_000,
        });
      }),
    );
    const byLink = new Map<string, FaultProxy>();
    for (const [key, proxy] of proxies) byLink.set(key, await proxy);
    const link = (from: number, to: number) => {
      const proxy = byLink.get(`${to}-${from}`);
      if (proxy === undefined) throw new Error(`no link from rank ${from} to rank ${to}`);
      return proxy;
    };
    const linksOf = (rank: number) =>
      [...byLink].filter(([key]) => key.split('-').map(Number).includes(rank)).map(([, proxy]) => proxy);
    const ranks = configs.map((config, rank) => {
      const tcp = tcpTransportConfig(config);
      const transport = new TcpTransport(rank, size, links[rank] ?? [], {
        ioTimeoutMs: tcp.timeouts.ioMs,
        shareFate: true,
        heartbeatMs: tcp.heartbeatMs ?? 0,
      });
      return RingReduce.withEngine(config, new LocalEngine(config, transport));
    });
    return {
      ranks,
      link,
      linksOf,
      links: () => [...byLink.values()],
      close: async () => {
        await Promise.allSettled(ranks.map((rr) => rr.shutdown()));
        await Promise.all([...byLink.values()].map((p) => p.close()));
      },
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await server.close();
  }
}
