/**
 * Bounded fuzz of the decoders that face the network: the transport's frame header and
 * receiver, and the mesh handshake (decoders and a live acceptor). Every malformed input must
 * end in a ProtocolError for that connection, never in another exception, a crash or an
 * allocation past the limits. Deterministic (seeded), a few thousand cases, about a second.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import {
  checkAck,
  checkChallenge,
  decodeHello,
  decodeResponse,
  encodeAck,
  encodeChallenge,
  encodeHello,
  encodeResponse,
  helloLength,
} from '../../src/rendezvous/handshake.js';
import { connectMesh, destroyLinks } from '../../src/rendezvous/mesh.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { startOp } from '../../src/transport/pending_op.js';
import {
  decodeHeader,
  encodeHeader,
  type FrameKind,
  kHeaderBytes,
  kKindControl,
  kKindData,
  kKindLink,
  kLinkHeartbeat,
  kLinkNotice,
} from '../../src/transport/tcp/framing.js';
import { PeerReceiver } from '../../src/transport/tcp/receiver.js';

function rng(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

function mutate(rand: (n: number) => number, valid: Uint8Array): Uint8Array {
  const out = Uint8Array.from(valid);
  const flips = 1 + rand(4);
  for (let f = 0; f < flips; f++) out[rand(out.length)] = rand(256);
  return rand(4) === 0 ? out.subarray(0, rand(out.length)) : out;
}

/** Calls `fn`; an exception other than ProtocolError fails the test, naming the input. */
function onlyProtocolErrors(input: Uint8Array, fn: () => void): boolean {
  try {
    fn();
    return true;
  } catch (error) {
    assert.ok(error instanceof ProtocolError, `${String(error)} for input ${Buffer.from(input).toString('hex')}`);
    return false;
  }
}

const limits = { maxFrameBytes: 1 << 16, maxControlBytes: 4096 };

function frame(kind: FrameKind, tag: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(kHeaderBytes + payload.byteLength);
  encodeHeader(kind, tag, payload.byteLength, out);
  out.set(payload, kHeaderBytes);
  return out;
}

describe('fuzz: transport frames', () => {
  it('decodeHeader accepts only headers within the limits, and refuses the rest with ProtocolError', () => {
    const rand = rng(1);
    let accepted = 0;
    for (let i = 0; i < 5000; i++) {
      const bytes = Uint8Array.from({ length: kHeaderBytes }, () => rand(256));
      if (i % 2 === 0) bytes[0] = 0x52; // get past the magic half the time
      if (i % 4 === 0) {
        // A plausible header: known kind, no flags, a small tag or length.
        bytes.set([1 + rand(3), 0, 0], 1);
        if (rand(2) === 0) bytes.set([rand(4), 0, 0, 0], 4);
        bytes.set([rand(256), rand(256), rand(2), 0], 8);
      }
      onlyProtocolErrors(bytes, () => {
        const header = decodeHeader(bytes, 0, limits);
        accepted++;
        const limit = header.kind === kKindData ? limits.maxFrameBytes : limits.maxControlBytes;
        assert.ok(header.length <= limit);
      });
    }
    assert.ok(accepted > 0);
  });

  it('the receiver survives random and mutated streams cut at random points', () => {
    const rand = rng(2);
    const valid = Buffer.concat([
      frame(
        kKindData,
        7,
        Uint8Array.from({ length: 300 }, (_, i) => i),
      ),
      frame(kKindControl, 0, Uint8Array.of(1, 2, 3)),
      frame(kKindLink, kLinkHeartbeat, new Uint8Array(0)),
      frame(kKindLink, kLinkNotice, Uint8Array.of(1, 0, 0, 0, 0x41)),
      frame(kKindData, 8, new Uint8Array(40_000)),
    ]);
    let violations = 0;
    for (let i = 0; i < 400; i++) {
      const stream = i % 3 === 0 ? Uint8Array.from({ length: 1 + rand(200) }, () => rand(256)) : mutate(rand, valid);
      let violation: ProtocolError | null = null;
      const receiver = new PeerReceiver({
        limits,
        who: 'rank 1 (fuzz)',
        onControl: () => {},
        onLink: () => {},
        onViolation: (error) => {
          assert.ok(error instanceof ProtocolError);
          violation = error;
        },
      });
      const pending = new Set<ReturnType<typeof startOp>[0]>();
      const settled: Promise<unknown>[] = [];
      for (const [tag, length] of [
        [7, 300],
        [8, 40_000],
      ] as const) {
        const [op, promise] = startOp('recv', 1, tag, pending);
        settled.push(promise.catch(() => {}));
        receiver.post(tag, new Uint8Array(length), op);
      }
      let at = 0;
      while (at < stream.length) {
        const into = receiver.buffer();
        assert.ok(into.byteLength > 0);
        const n = Math.min(into.byteLength, stream.length - at, 1 + rand(5000));
        into.set(stream.subarray(at, at + n));
        at += n;
        if (!receiver.onRead(n, into)) break;
      }
      if (violation !== null) violations++;
      receiver.fail(new ProtocolError('end of fuzz case'));
    }
    assert.ok(violations > 50, `only ${violations} violations`);
  });
});

describe('fuzz: mesh handshake', () => {
  it('decoders refuse random and mutated messages with ProtocolError only', () => {
    const rand = rng(3);
    const nonce = Buffer.alloc(32, 9);
    const valid = [
      encodeHello(1, 4, 'job', nonce),
      encodeChallenge(0, 2, 4, nonce, nonce),
      encodeResponse(1, 4, nonce),
      encodeAck(0, 2, 4),
    ];
    for (let i = 0; i < 4000; i++) {
      const input = Buffer.from(
        i % 2 === 0 ? mutate(rand, valid[rand(valid.length)] as Buffer) : Uint8Array.from({ length: rand(120) }, () => rand(256)),
      );
      onlyProtocolErrors(input, () => {
        if (input.byteLength >= 16) helloLength(input);
      });
      onlyProtocolErrors(input, () => decodeHello(input));
      onlyProtocolErrors(input, () => decodeResponse(input, 1, 4));
      if (input.byteLength >= 80) onlyProtocolErrors(input, () => checkChallenge(input.subarray(0, 80), 2, 4, 'rank 2'));
      if (input.byteLength >= 16) onlyProtocolErrors(input, () => checkAck(input.subarray(0, 16), 2, 4, 'rank 2'));
    }
  });

  it('a live acceptor refuses 200 random and mutated strangers, then the mesh completes', { timeout: 30_000 }, async () => {
    const rand = rng(4);
    const server = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
    const address = await server.listen();
    const key = new JobKey('fuzz-secret');
    const stores = await Promise.all([0, 1].map(() => TcpStoreClient.connect({ ...address, connectTimeoutMs: 2000 })));
    const refused: string[] = [];
    const first = connectMesh({
      store: stores[0] as TcpStoreClient,
      rank: 0,
      size: 2,
      host: '127.0.0.1',
      jobId: 'fuzz',
      key,
      timeoutMs: 20_000,
      onRefused: (_, reason) => refused.push(reason),
      reportLimit: false, // every refusal, counted below (report_limiter.ts summarises by default)
    });
    const { host, port } = JSON.parse(Buffer.from(await (stores[1] as TcpStoreClient).get('mesh/fuzz/addr/0', 2000)).toString());
    const nonce = Buffer.alloc(32, 5);
    const valid = [
      encodeHello(1, 2, 'fuzz', nonce),
      Buffer.concat([encodeHello(1, 2, 'fuzz', nonce), encodeResponse(1, 2, nonce)]),
    ];
    const strangers = Array.from({ length: 200 }, (_, i) =>
      i % 2 === 0
        ? mutate(rand, valid[rand(valid.length)] as Buffer)
        : Uint8Array.from({ length: 1 + rand(100) }, () => rand(256)),
    );
    for (let i = 0; i < strangers.length; i += 25) {
      await Promise.all(
        strangers.slice(i, i + 25).map(
          (bytes) =>
            new Promise<void>((resolve) => {
              const socket = net.connect(port, host);
              const timer = setTimeout(() => socket.destroy(), 300);
              socket.on('error', () => {});
              socket.on('data', () => {});
              socket.on('close', () => {
                clearTimeout(timer);
                resolve();
              });
              socket.write(bytes);
            }),
        ),
      );
    }
    const links = await Promise.all([
      first,
      connectMesh({
        store: stores[1] as TcpStoreClient,
        rank: 1,
        size: 2,
        host: '127.0.0.1',
        jobId: 'fuzz',
        key,
        timeoutMs: 5000,
      }),
    ]);
    assert.ok(refused.length > 50, `only ${refused.length} refusals`);
    for (const l of links) destroyLinks(l);
    await Promise.all(stores.map((s) => s.close()));
    await server.close();
  });
});
