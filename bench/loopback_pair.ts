/**
 * The 2-rank TCP transport over 127.0.0.1 that the transport benchmarks (tcp_pingpong.ts,
 * tcp_transport_throughput.ts) measure: a free port for rank 0's store, and one rank's side.
 */
import { TcpStoreServer } from '../src/rendezvous/tcp_store.js';
import { createTcpTransport } from '../src/transport/tcp/index.js';

/** A port that was free a moment ago, for rank 0's store. */
export async function freeStorePort(): Promise<number> {
  const probe = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
  const { port } = await probe.listen();
  await probe.close();
  return port;
}

/** Rank `rank` (0 or 1) of a 2-rank transport whose rank 0 hosts the store on `port`. */
export function connectLoopbackPair(rank: number, port: number, jobId: string) {
  return createTcpTransport({
    rank,
    size: 2,
    storeAddress: { host: '127.0.0.1', port },
    hostStore: rank === 0,
    jobId,
    timeouts: { connectMs: 10_000, ioMs: 30_000 },
    heartbeatMs: 2000, // the default of a job (api/config.ts)
  });
}
