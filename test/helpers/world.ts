/** Starts N ranks inside this process (each its own engine worker thread) over loopback TCP. */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export async function startWorld(size: number, options: InitOptions = {}): Promise<RingReduce[]> {
  const port = await freePort();
  const jobId = randomBytes(6).toString('hex');
  return Promise.all(
    Array.from({ length: size }, (_, rank) =>
      RingReduce.init({ rank, size, storeAddress: `127.0.0.1:${port}`, jobId, logLevel: 'error', ...options }),
    ),
  );
}

export async function stopWorld(world: readonly RingReduce[]): Promise<void> {
  await Promise.all(world.map((rr) => rr.shutdown()));
}
