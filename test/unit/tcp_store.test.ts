import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, ProtocolError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import type { StoreAddress } from '../../src/rendezvous/store.js';
import {
  encodeFrame,
  encodeKeyed,
  kOpAuth,
  kOpError,
  kOpGet,
  kOpHello,
  kOpHelloOk,
  kOpSet,
  kStoreClientLabel,
  type StoreFrame,
  StoreFrameReader,
} from '../../src/rendezvous/store_protocol.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { FaultProxy } from '../helpers/fault_proxy.js';

const kKey = new JobKey('store-test-secret');
const connect = (address: StoreAddress, connectTimeoutMs = 2000, key = kKey) =>
  TcpStoreClient.connect({ ...address, connectTimeoutMs, key });

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

const hello = () => encodeFrame(kOpHello, 0, new Uint8Array(32));

/**
 * Authenticates by hand (hello, read the server's nonce, prove the key), then sends `bytes`
 * and collects the frames that follow until the server closes (bounded).
 */
function rawSession(address: StoreAddress, bytes: Uint8Array, waitMs = 2000): Promise<StoreFrame[]> {
  return new Promise((resolve) => {
    const frames: StoreFrame[] = [];
    const reader = new StoreFrameReader(1 << 20);
    const nonce = Buffer.alloc(32, 7);
    const socket = net.connect(address.port, address.host);
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (chunk) => {
      try {
        reader.push(chunk, (f) => {
          if (f.op === kOpHelloOk) {
            const proof = kKey.mac(kStoreClientLabel, nonce, f.body.subarray(0, 32));
            socket.write(encodeFrame(kOpAuth, 0, proof));
            socket.end(bytes);
          } else frames.push(f);
        });
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(frames);
    });
    socket.write(encodeFrame(kOpHello, 0, nonce));
  });
}

describe('TcpStore', () => {
  let server: TcpStoreServer;
  let address: StoreAddress;
  const protocolErrors: string[] = [];
  const refusals: string[] = [];

  before(async () => {
    server = new TcpStoreServer({
      host: '127.0.0.1',
      port: 0,
      key: kKey,
      maxFrameBytes: 1 << 16,
      onRefused: (remote, reason) => refusals.push(`${remote}: ${reason}`),
      onProtocolError: (e) => protocolErrors.push(e.message),
      // Every refusal, not a summary: these tests count them (the limit has its own test).
      reportLimit: false,
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

    const big = encodeFrame(kOpSet, 1, new Uint8Array(0));
    big.writeUInt32LE(1 << 30, 8);
    const tooBig = await rawSession(address, big);
    assert.match(Buffer.from(tooBig.at(-1)?.body ?? []).toString(), /exceeds the limit of 65536/);
    // Before authentication the limit is a few bytes: a stranger cannot make the server allocate.
    const preAuth = await rawExchange(address, big);
    assert.match(Buffer.from(preAuth.at(-1)?.body ?? []).toString(), /exceeds the limit of 64\b/);

    const noHello = await rawExchange(address, encodeFrame(kOpGet, 1, encodeKeyed(new Uint8Array(4), 'k')));
    assert.match(Buffer.from(noHello[0]?.body ?? []).toString(), /expected a hello first/);

    const noAuth = await rawExchange(
      address,
      Buffer.concat([hello(), encodeFrame(kOpGet, 1, encodeKeyed(new Uint8Array(4), 'k'))]),
    );
    assert.match(Buffer.from(noAuth.at(-1)?.body ?? []).toString(), /expected the auth after the hello/);

    const badKey = encodeFrame(kOpSet, 2, Uint8Array.of(0xff, 0x7f, 1));
    assert.match(Buffer.from((await rawSession(address, badKey)).at(-1)?.body ?? []).toString(), /bad store key length/);

    await survivor.set('still', Uint8Array.of(9));
    assert.deepEqual([...(await survivor.get('still', 1000))], [9]);
    assert.ok(protocolErrors.length >= 4);
    await survivor.close();
  });

  it('survives 600 random and mutated inputs, before and after authentication (bounded fuzz)', { timeout: 60_000 }, async () => {
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const mutate = (valid: Buffer): Uint8Array => {
      const base = Buffer.from(valid);
      const flips = 1 + rand(4);
      for (let f = 0; f < flips; f++) base[rand(base.length)] = rand(256);
      return rand(4) === 0 ? base.subarray(0, rand(base.length)) : base;
    };
    const preAuth = [hello(), Buffer.concat([hello(), encodeFrame(kOpAuth, 0, new Uint8Array(32))])];
    const requests = [
      encodeFrame(kOpSet, 1, encodeKeyed(new Uint8Array(0), 'fuzz', Uint8Array.of(1, 2, 3))),
      encodeFrame(kOpGet, 2, encodeKeyed(Uint8Array.of(50, 0, 0, 0), 'fuzz/wait')),
      encodeFrame(0x04, 3, encodeKeyed(new Uint8Array(8), 'fuzz/count')),
    ];
    const strangers: Uint8Array[] = [];
    const sessions: Uint8Array[] = [];
    for (let i = 0; i < 600; i++) {
      if (i % 3 === 0) strangers.push(Uint8Array.from({ length: 1 + rand(64) }, () => rand(256)));
      else if (i % 3 === 1) strangers.push(mutate(preAuth[rand(preAuth.length)] as Buffer));
      else sessions.push(mutate(requests[rand(requests.length)] as Buffer));
    }
    const started = performance.now();
    for (let i = 0; i < strangers.length; i += 25) {
      await Promise.all(strangers.slice(i, i + 25).map((c) => rawExchange(address, c, 1500)));
    }
    for (let i = 0; i < sessions.length; i += 25) {
      await Promise.all(sessions.slice(i, i + 25).map((c) => rawSession(address, c, 1500)));
    }
    assert.ok(performance.now() - started < 50_000);
    const client = await connect(address);
    await client.set('after-fuzz', Uint8Array.of(1));
    assert.deepEqual([...(await client.get('after-fuzz', 1000))], [1]);
    // No stranger got as far as a key.
    await assert.rejects(client.get('fuzz/count', 0), TimeoutError);
    await client.close();
  });

  it('refuses a client with a wrong or no secret, and logs it; others go on', async () => {
    const survivor = await connect(address);
    const before = refusals.length;
    for (const key of [new JobKey('not-the-secret'), new JobKey(undefined)]) {
      await assert.rejects(
        connect(address, 1000, key),
        (e) => e instanceof ProtocolError && /could not prove it knows the job secret/.test(e.message),
      );
    }
    // A client whose secret is wrong learns it from the server's proof and hangs up before
    // proving anything. A client that sends a wrong proof anyway is refused and logged.
    const nonce = Buffer.alloc(32, 1);
    const frames = await new Promise<StoreFrame[]>((resolve) => {
      const got: StoreFrame[] = [];
      const reader = new StoreFrameReader(1 << 16);
      const socket = net.connect(address.port, address.host);
      socket.on('data', (chunk) =>
        reader.push(chunk, (f) => {
          got.push(f);
          if (f.op === kOpHelloOk)
            socket.write(encodeFrame(kOpAuth, 0, new JobKey('wrong').mac(kStoreClientLabel, nonce, f.body.subarray(0, 32))));
        }),
      );
      socket.on('error', () => {});
      socket.on('close', () => resolve(got));
      socket.write(encodeFrame(kOpHello, 0, nonce));
    });
    assert.equal(frames.at(-1)?.op, kOpError);
    assert.match(Buffer.from(frames.at(-1)?.body ?? []).toString(), /authentication failed: wrong or missing job secret/);
    // All three are logged: the two clients that hung up, and the wrong proof.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const logged = refusals.slice(before);
    assert.equal(
      logged.filter((r) => /^127\.0\.0\.1:\d+: closed the connection before authenticating/.test(r)).length,
      2,
      logged.join('\n'),
    );
    assert.equal(logged.filter((r) => /^127\.0\.0\.1:\d+: authentication failed/.test(r)).length, 1, logged.join('\n'));
    await survivor.set('still-here', Uint8Array.of(1));
    assert.deepEqual([...(await survivor.get('still-here', 1000))], [1]);
    await survivor.close();
  });

  it('drops a connection that does not authenticate in time', async () => {
    const slow = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: kKey, authTimeoutMs: 150 });
    const where = await slow.listen();
    try {
      const started = performance.now();
      // Connects and says nothing, the socket held open.
      const socket = net.connect(where.port, where.host);
      socket.on('error', () => {});
      await new Promise((resolve) => socket.once('close', resolve));
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= 140 && elapsed < 2000, `dropped after ${elapsed} ms`);
    } finally {
      await slow.close();
    }
  });
});

describe('TcpStoreClient connect', () => {
  it('retries until a late server comes up', async () => {
    const port = await freePort();
    const started = performance.now();
    const connecting = connect({ host: '127.0.0.1', port }, 5000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const late = new TcpStoreServer({ host: '127.0.0.1', port, key: kKey });
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
    const server = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: kKey });
    const address = await server.listen();
    const client = await connect(address);
    const pending = client.get('k', 5000);
    await server.close();
    await assert.rejects(
      pending,
      (e) =>
        !(e instanceof ProtocolError) && /the store at 127\.0\.0\.1:\d+ (closed|broke) the connection/.test((e as Error).message),
    );
    await client.close();
  });

  it('names the store and who hosts it when it goes silent while a get waits', async () => {
    const server = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: kKey });
    const address = await server.listen();
    const proxy = await FaultProxy.start(address);
    const client = await TcpStoreClient.connect({
      host: '127.0.0.1',
      port: proxy.port,
      connectTimeoutMs: 5000,
      key: kKey,
      hostedBy: 'rank 0',
      silenceMs: 300,
    });
    // Answered pings keep a long wait alive past the silence limit.
    const early = client.get('late', 700);
    await assert.rejects(early, TimeoutError);
    const pending = client.get('never', 10_000);
    const started = performance.now();
    proxy.silence();
    await assert.rejects(pending, (e: Error) =>
      new RegExp(
        `^the store at 127\\.0\\.0\\.1:${proxy.port} \\(rank 0 hosts it\\) has not answered for \\d+ ms: its process is stopped or hung, or its host is down or cut off$`,
      ).test(e.message),
    );
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 3000, `failed after ${elapsed} ms`);
    await client.close();
    await proxy.close();
    await server.close();
  });

  it('names the store when it accepts the connection but never answers the hello', async () => {
    const held: net.Socket[] = [];
    const mute = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    const { port } = mute.address() as net.AddressInfo;
    try {
      await assert.rejects(
        TcpStoreClient.connect({
          host: '127.0.0.1',
          port,
          connectTimeoutMs: 10_000,
          key: kKey,
          hostedBy: 'ringrun',
          silenceMs: 300,
        }),
        (e: Error) => /^the store at 127\.0\.0\.1:\d+ \(ringrun hosts it\) has not answered for \d+ ms/.test(e.message),
      );
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => mute.close(resolve));
    }
  });
});
