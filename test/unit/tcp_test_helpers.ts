/** N ranks of the TCP transport in one process over 127.0.0.1, for the transport and mesh tests. */
import { connectMesh, type PeerLink } from '../../src/rendezvous/mesh.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { TcpTransport, type TcpTransportOptions } from '../../src/transport/tcp/tcp_transport.js';

export interface World {
  transports: TcpTransport[];
  links: PeerLink[][];
  close(): Promise<void>;
}

/** `options` applies to every rank, or is chosen per rank. */
export async function makeWorld(
  size: number,
  options: Partial<TcpTransportOptions> | ((rank: number) => Partial<TcpTransportOptions>) = {},
): Promise<World> {
  const server = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
  const address = await server.listen();
  const clients = await Promise.all(
    Array.from({ length: size }, () => TcpStoreClient.connect({ ...address, connectTimeoutMs: 5000 })),
  );
  const links = await Promise.all(
    clients.map((store, rank) => connectMesh({ store, rank, size, host: '127.0.0.1', jobId: 'test', timeoutMs: 5000 })),
  );
  await Promise.all(clients.map((c) => c.close()));
  await server.close();
  const optionsOf = typeof options === 'function' ? options : () => options;
  const transports = links.map((l, rank) => new TcpTransport(rank, size, l, { ioTimeoutMs: 10_000, ...optionsOf(rank) }));
  return {
    transports,
    links,
    close: async () => {
      await Promise.all(transports.map((t) => t.close()));
    },
  };
}

/** A deterministic byte pattern, different per (seed, index). */
export function pattern(length: number, seed: number, shared = false): Uint8Array {
  const out = new Uint8Array(shared ? new SharedArrayBuffer(length) : new ArrayBuffer(length));
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** A fast pattern for large buffers: every u32 holds its index plus the seed. */
export function bigPattern(bytes: number, seed: number, shared = false): Uint8Array {
  const out = new Uint8Array(shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
  const words = new Uint32Array(out.buffer, 0, bytes >>> 2);
  for (let i = 0; i < words.length; i++) words[i] = (i + seed) >>> 0;
  return out;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Cuts the link between a and b as a crash of a would: a's two sockets to b vanish, without a transport close. */
export function cutLink(world: World, a: number, b: number): void {
  const link = world.links[a]?.find((l) => l.peer === b);
  if (link === undefined) throw new Error(`rank ${a} has no link to rank ${b}`);
  link.recvSocket.destroy();
  link.sendSocket.destroy();
}

/** Makes `rank` read nothing more, as if its process were stopped: it answers no ping. */
export function freeze(world: World, rank: number): void {
  for (const link of world.links[rank] ?? []) link.recvSocket.pause();
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Handles that would keep the process alive, by type (after letting closing handles finish). */
export async function liveHandles(): Promise<string[]> {
  await delay(20);
  return process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP') || r.startsWith('Pipe') || r === 'Timeout');
}
