/** Starts N ranks inside this process (each its own engine worker thread) over loopback TCP, or WebSockets. */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { TcpStoreServer } from '../../src/rendezvous/tcp_store.js';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Rank r's own options, over the world's (say, a setting only some ranks have). */
export type PerRank = (rank: number) => InitOptions;

export async function startWorld(size: number, options: InitOptions = {}, perRank?: PerRank): Promise<RingReduce[]> {
  return Promise.all(initWorld(size, options, perRank));
}

/** Each rank's init() of a TCP world, unsettled: for tests that expect some or all of them to fail. */
export async function initWorldSettled(
  size: number,
  options: InitOptions = {},
  perRank?: PerRank,
): Promise<PromiseSettledResult<RingReduce>[]> {
  return Promise.allSettled(initWorld(size, options, perRank, await freePort()));
}

function initWorld(size: number, options: InitOptions, perRank: PerRank | undefined, port?: number): Promise<RingReduce>[] {
  const jobId = randomBytes(6).toString('hex');
  const at = port === undefined ? freePort() : Promise.resolve(port);
  return Array.from({ length: size }, async (_, rank) =>
    RingReduce.init({
      rank,
      size,
      storeAddress: `127.0.0.1:${await at}`,
      jobId,
      logLevel: 'error',
      ...options,
      ...perRank?.(rank),
    }),
  );
}

export async function stopWorld(world: readonly RingReduce[]): Promise<void> {
  await Promise.all(world.map((rr) => rr.shutdown()));
}

/**
 * N ranks over the web backend (WebSockets on loopback, as Node ranks of a job with browser ranks).
 * No rank hosts the store: the test does, as ringrun would, until every rank has connected.
 */
export async function startWebWorld(size: number, options: InitOptions = {}): Promise<RingReduce[]> {
  const store = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: new JobKey(options.secret) });
  const { port } = await store.listen();
  const jobId = randomBytes(6).toString('hex');
  try {
    const world = await Promise.all(
      Array.from({ length: size }, (_, rank) =>
        RingReduce.init({ rank, size, backend: 'web', storeAddress: `127.0.0.1:${port}`, jobId, logLevel: 'error', ...options }),
      ),
    );
    const backends = new Set(world.map((rr) => rr.backend()));
    if (size > 1 && (backends.size !== 1 || !backends.has('web')))
      throw new Error(`web world runs over ${[...backends].join(', ')}`);
    return world;
  } finally {
    await store.close();
  }
}
