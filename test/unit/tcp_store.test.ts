import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, ProtocolError, ShutdownError, TimeoutError } from '../../src/api/errors.js';
import type { StoreAddress } from '../../src/rendezvous/store.js';
import {
  encodeFrame,
  encodeKeyed,
  kAuthNone,
  kOpError,
  kOpGet,
  kOpHello,
  kOpSet,
  type StoreFrame,
  StoreFrameReader,
} from '../../src/rendezvous/store_protocol.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';

const connect = (address: StoreAddress, connectTimeoutMs = 2000) => TcpStoreClient.connect({ ...address, connectTimeoutMs });

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Sends raw bytes, half-closes, and collects the server's frames until it closes (bounded). */
function rawExchange(address: StoreAddress, bytes: Uint8Array, waitMs = 2000): Promise<StoreFrame[]> {
  return new Promise((resolve) => {
    const frames: StoreFrame[] = [];
    const reader = new StoreFrameReader(1 << 20);
    const socket = net.connect(address.port, address.host);
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (chunk) => {
      try {
        reader.push(chunk, (f) => frames.push(f));
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(frames);
    });
    socket.end(bytes);
  });
}

const hello = () => encodeFrame(kOpHello, 0, Uint8Array.of(kAuthNone));

describe('TcpStore', () => {
  let server: TcpStoreServer;
  let address: StoreAddress;
  const protocolErrors: string[] = [];

  before(async () => {
    server = new TcpStoreServer({
      host: '127.0.0.1',
      port: 0,
      maxFrameBytes: 1 << 16,
      onProtocolError: (e) => protocolErrors.push(e.message),
    });
    address = await server.listen();
  });
  after(() => server.close());

  it('sets and gets binary values, including an empty one', async () => {
    const client = await connect(address);
    await client.set('a', Uint8Array.of(0, 255, 7));
    await client.set('empty', new Uint8Array(0));
    assert.deepEqual([...(await client.get('a', 1000))], [0, 255, 7]);
    assert.equal((await client.get('empty', 1000)).byteLength, 0);
    await client.close();
  });

  it('answers a waiting get when another client sets the key, without polling', async () => {
    const [a, b] = await Promise.all([connect(address), connect(address)]);
    const started = performance.now();
    const pending = a.get('later', 5000);
    const setter = new Promise((resolve) => setTimeout(resolve, 150)).then(() => b.set('later', Uint8Array.of(42)));
    assert.deepEqual([...(await pending)], [42]);
    await setter;
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 140 && elapsed < 1500, `answered after ${elapsed} ms`);
    await Promise.all([a.close(), b.close()]);
  });

  it('rejects a get with TimeoutError naming the key at its deadline; 0 means now', async () => {
    const client = await connect(address);
    const started = performance.now();
    await assert.rejects(client.get('never/set', 200), (e) => e instanceof TimeoutError && e.message.includes('"never/set"'));
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 190 && elapsed < 1200, `timed out after ${elapsed} ms`);
    await assert.rejects(client.get('never/set', 0), TimeoutError);
    await client.set('now', Uint8Array.of(1));
    assert.deepEqual([...(await client.get('now', 0))], [1]);
    await client.close();
  });

  it('adds atomically across clients', async () => {
    const clients = await Promise.all([0, 1, 2].map(() => connect(address)));
    const results = await Promise.all(clients.flatMap((c) => Array.from({ length: 20 }, () => c.add('counter', 1))));
    assert.deepEqual(
      results.sort((x, y) => x - y),
      Array.from({ length: 60 }, (_, i) => i + 1),
    );
    assert.equal(await clients[0]?.add('counter', -10), 50);
    await clients[0]?.set('text', Uint8Array.of(1, 2));
    await assert.rejects(clients[0]?.add('text', 1) as Promise<number>, /8-byte integer/);
    assert.equal(await clients[0]?.add('counter', 0), 50, 'a refused add leaves the connection usable');
    await Promise.all(clients.map((c) => c.close()));
  });

  it('refuses bad keys at the client edge', async () => {
    const client = await connect(address);
    await assert.rejects(() => client.set('', Uint8Array.of(1)), InvalidArgumentError);
    await assert.rejects(() => client.get('k'.repeat(2000), 10), InvalidArgumentError);
    await client.close();
  });

  it('rejects pending gets with ShutdownError on close, and later calls too', async () => {
    const client = await connect(address);
    const pending = client.get('closing', 5000);
    await client.close();
    await assert.rejects(pending, ShutdownError);
    await assert.rejects(client.set('x', Uint8Array.of(1)), ShutdownError);
    await client.close(); // idempotent
  });

  it('answers malformed frames with an error frame, closes that connection only', async () => {
    const survivor = await connect(address);
    const badMagic = await rawExchange(address, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
    assert.equal(badMagic.length, 1);
    assert.equal(badMagic[0]?.op, kOpError);
    assert.match(Buffer.from(badMagic[0]?.body ?? []).toString(), /protocol error from 127\.0\.0\.1:\d+: bad store frame magic/);

    const oversized = Buffer.from(hello());
    const big = encodeFrame(kOpSet, 1, new Uint8Array(0));
    big.writeUInt32LE(1 << 30, 8);
    const tooBig = await rawExchange(address, Buffer.concat([oversized, big]));
    assert.match(Buffer.from(tooBig.at(-1)?.body ?? []).toString(), /exceeds the limit of 65536/);

    const noHello = await rawExchange(address, encodeFrame(kOpGet, 1, encodeKeyed(new Uint8Array(4), 'k')));
    assert.match(Buffer.from(noHello[0]?.body ?? []).toString(), /expected a hello first/);

    const badKey = Buffer.concat([hello(), encodeFrame(kOpSet, 2, Uint8Array.of(0xff, 0x7f, 1))]);
    assert.match(Buffer.from((await rawExchange(address, badKey)).at(-1)?.body ?? []).toString(), /bad store key length/);

    await survivor.set('still', Uint8Array.of(9));
    assert.deepEqual([...(await survivor.get('still', 1000))], [9]);
    assert.ok(protocolErrors.length >= 4);
    await survivor.close();
  });

  it('survives 500 random and mutated inputs (bounded fuzz)', { timeout: 60_000 }, async () => {
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const valid = [
      Buffer.concat([hello(), encodeFrame(kOpSet, 1, encodeKeyed(new Uint8Array(0), 'fuzz', Uint8Array.of(1, 2, 3)))]),
      Buffer.concat([hello(), encodeFrame(kOpGet, 2, encodeKeyed(Uint8Array.of(50, 0, 0, 0), 'fuzz/wait'))]),
      Buffer.concat([hello(), encodeFrame(0x04, 3, encodeKeyed(new Uint8Array(8), 'fuzz/count'))]),
    ];
    const cases: Uint8Array[] = [];
    for (let i = 0; i < 500; i++) {
      if (i % 2 === 0) {
        cases.push(Uint8Array.from({ length: 1 + rand(64) }, () => rand(256)));
      } else {
        const base = Buffer.from(valid[rand(valid.length)] as Buffer);
        const flips = 1 + rand(4);
        for (let f = 0; f < flips; f++) base[rand(base.length)] = rand(256);
        cases.push(rand(4) === 0 ? base.subarray(0, rand(base.length)) : base);
      }
    }
    const started = performance.now();
    for (let i = 0; i < cases.length; i += 25) {
      await Promise.all(cases.slice(i, i + 25).map((c) => rawExchange(address, c, 1500)));
    }
    assert.ok(performance.now() - started < 50_000);
    const client = await connect(address);
    await client.set('after-fuzz', Uint8Array.of(1));
    assert.deepEqual([...(await client.get('after-fuzz', 1000))], [1]);
    await client.close();
  });
});

describe('TcpStoreClient connect', () => {
  it('retries until a late server comes up', async () => {
    const port = await freePort();
    const started = performance.now();
    const connecting = connect({ host: '127.0.0.1', port }, 5000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const late = new TcpStoreServer({ host: '127.0.0.1', port });
    await late.listen();
    const client = await connecting;
    assert.ok(performance.now() - started >= 290);
    await client.set('k', Uint8Array.of(1));
    await client.close();
    await late.close();
  });

  it('gives up at the deadline with TimeoutError naming the address', async () => {
    const port = await freePort();
    const started = performance.now();
    await assert.rejects(
      connect({ host: '127.0.0.1', port }, 300),
      (e) => e instanceof TimeoutError && e.message.includes(`127.0.0.1:${port}`) && e.message.includes('ECONNREFUSED'),
    );
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 290 && elapsed < 1500, `gave up after ${elapsed} ms`);
  });

  it('fails with a clear error when the peer is not a store', async () => {
    const impostor = net.createServer((s) => {
      s.resume(); // read, so the impostor's socket sees the client leave and closes
      s.end(Buffer.alloc(12, 0x41));
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const { port } = impostor.address() as net.AddressInfo;
    await assert.rejects(
      connect({ host: '127.0.0.1', port }, 1000),
      /bad reply from the store at 127\.0\.0\.1:\d+: bad store frame magic/,
    );
    await new Promise((resolve) => impostor.close(resolve));
  });

  it('reports a server that closes while a get waits', async () => {
    const server = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
    const address = await server.listen();
    const client = await connect(address);
    const pending = client.get('k', 5000);
    await server.close();
    await assert.rejects(
      pending,
      (e) => !(e instanceof ProtocolError) && /store connection to 127\.0\.0\.1:\d+ (closed|failed)/.test((e as Error).message),
    );
    await client.close();
  });
});
