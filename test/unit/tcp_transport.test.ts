/**
 * What is the TCP transport's own: zero-copy receive, staging, framing, a dead peer's address,
 * draining after a close, teardown on timeout, handles, and the mapping of the job's settings.
 * The transport contract is test/unit/transport_contract.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kDefaultPipelineDepth } from '../../src/algorithms/options.js';
import { resolveConfig } from '../../src/core/config.js';
import { PeerFailureError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { encodeHeader, kHeaderBytes, kKindData } from '../../src/transport/tcp/framing.js';
import { tcpTransportConfig } from '../../src/transport/tcp/index.js';
import { bigPattern, delay, equalBytes, liveHandles, makeWorld, pattern } from './tcp_test_helpers.js';

const kTestTimeout = { timeout: 30_000 };

/** Resolves once `transport` has received a control message from `peer` (so earlier data has arrived too). */
function fence(sender: { sendControl(p: number, b: Uint8Array): Promise<void> }, receiverWaits: Promise<void>, to: number) {
  return Promise.all([sender.sendControl(to, Uint8Array.of(0xfe)), receiverWaits]);
}

describe('TcpTransport', () => {
  it('lands 64 MiB straight in SharedArrayBuffer memory when the recv is posted first', kTestTimeout, async () => {
    const world = await makeWorld(2);
    try {
      const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
      const size = 64 * 1024 * 1024;
      const source = bigPattern(size, 11, true);
      const into = new Uint8Array(new SharedArrayBuffer(size + 32), 16, size); // an offset view, like a tensor slice
      await Promise.all([b.recv(0, 1, into), a.send(1, 1, source)]);
      assert.ok(equalBytes(into, source));
      assert.equal(new Uint8Array(into.buffer)[15], 0, 'nothing written before the view');
      assert.equal(new Uint8Array(into.buffer)[16 + size], 0, 'nothing written after the view');
      const stats = b.stats();
      // Copied: the first read (up to 64 KiB, before the recv is matched) and a tail shorter than
      // the direct-read minimum (16 KiB); everything else lands in place, over TCP or a Unix socket.
      assert.ok(stats.zeroCopyBytes >= size - 80 * 1024, `only ${stats.zeroCopyBytes} of ${size} bytes landed without a copy`);
      assert.equal(stats.zeroCopyBytes + stats.copiedBytes, size);
    } finally {
      await world.close();
    }
  });

  it('stages a large message that arrives first, and redirects one whose recv comes mid-way', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    const size = 16 * 1024 * 1024;
    let arrived: () => void = () => {};
    b.onControl(() => arrived());
    const first = bigPattern(size, 22, true);
    await a.send(1, 2, first);
    await fence(a, new Promise((r) => (arrived = r)), 1);
    const into = new Uint8Array(new SharedArrayBuffer(size));
    await b.recv(0, 2, into);
    assert.ok(equalBytes(into, first));
    assert.deepEqual(b.stats(), { zeroCopyBytes: 0, copiedBytes: size, stagedBytes: size, sharedBytes: 0 });

    // Posted while the payload streams in. The frame is written by hand in three pieces so the
    // recv is posted exactly mid-way: the staged part is copied over, the rest is redirected.
    const mib = 1024 * 1024;
    const second = bigPattern(4 * mib, 33, false);
    const header = new Uint8Array(kHeaderBytes);
    encodeHeader(kKindData, 3, second.byteLength, header);
    const wire = world.links[0]?.[0]?.sendSocket;
    assert.ok(wire);
    const until = (check: () => boolean) =>
      new Promise<void>((resolve) => {
        const poll = () => (check() ? resolve() : setTimeout(poll, 1));
        poll();
      });
    wire.write(header);
    wire.write(second.subarray(0, mib));
    await until(() => b.stats().stagedBytes === size + mib);
    const into2 = new Uint8Array(4 * mib);
    const receiving = b.recv(0, 3, into2);
    assert.equal(b.stats().copiedBytes, size + mib, 'the staged first MiB is copied at once');
    wire.write(second.subarray(mib, 2 * mib));
    await until(() => b.stats().copiedBytes + b.stats().zeroCopyBytes >= size + 2 * mib);
    wire.write(second.subarray(2 * mib));
    await receiving;
    assert.ok(equalBytes(into2, second));
    const stats = b.stats();
    assert.equal(stats.stagedBytes, size + mib);
    assert.equal(stats.copiedBytes + stats.zeroCopyBytes, size + 4 * mib);
    assert.ok(stats.zeroCopyBytes >= 2 * mib - 16 * 1024, `only ${stats.zeroCopyBytes} bytes landed without a copy`);
    await world.close();
  });

  it('reuses the staging memory of messages already received, without mixing their bytes', kTestTimeout, async () => {
    const world = await makeWorld(2);
    try {
      const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
      let arrived: () => void = () => {};
      b.onControl(() => arrived());
      // Rounds of large messages that all arrive before their recvs (so all are staged); each
      // round's recvs free staging that the next round takes again.
      for (let round = 0; round < 4; round++) {
        const sizes = [96 * 1024, 300 * 1024, 70 * 1024 + round];
        const sent = sizes.map((size, i) => pattern(size, 10 * round + i));
        await Promise.all(sent.map((data, i) => a.send(1, i, data)));
        await fence(a, new Promise((r) => (arrived = r)), 1);
        for (const [i, data] of sent.entries()) {
          const into = new Uint8Array(data.byteLength);
          await b.recv(0, i, into);
          assert.ok(equalBytes(into, data), `round ${round}, message ${i}`);
        }
      }
      assert.equal(b.stats().zeroCopyBytes, 0, 'every message was staged');
    } finally {
      await world.close();
    }
  });

  it('parses thousands of small frames, many to a read, in order', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    const count = 5000;
    const sends: Promise<void>[] = [];
    for (let i = 0; i < count; i++) sends.push(a.send(1, i % 3, pattern(1 + (i % 61), i)));
    const got: Uint8Array[] = [];
    const recvs: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const into = new Uint8Array(1 + (i % 61));
      got.push(into);
      recvs.push(b.recv(0, i % 3, into));
    }
    await Promise.all([...sends, ...recvs]);
    for (let i = 0; i < count; i++) assert.ok(equalBytes(got[i] as Uint8Array, pattern(1 + (i % 61), i)), `message ${i}`);
    await world.close();
  });

  it('a dead peer is named with its address, every survivor hears of it, the other links go on', kTestTimeout, async () => {
    const world = await makeWorld(4);
    const failures: [number, number, PeerFailureError][] = [];
    for (const t of world.transports) t.onPeerFailure((peer, error) => failures.push([t.rank, peer, error]));
    const pending = [0, 1, 3].map((r) => world.transports[r]?.recv(2, 7, new Uint8Array(10)) as Promise<void>);
    // Rank 2 "crashes": its sockets vanish without a transport close.
    for (const link of world.links[2] ?? []) {
      link.recvSocket.destroy();
      link.sendSocket.destroy();
    }
    for (const p of pending) {
      await assert.rejects(
        p,
        (e) => e instanceof PeerFailureError && e.peerRank === 2 && /rank 2 \(127\.0\.0\.1:\d+\)/.test(e.message),
      );
    }
    await delay(50);
    const seenBySurvivors = failures.filter(([rank]) => rank !== 2);
    assert.deepEqual(seenBySurvivors.map(([rank, peer]) => [rank, peer]).sort(), [
      [0, 2],
      [1, 2],
      [3, 2],
    ]);
    const r0 = world.transports[0];
    assert.ok(r0);
    const into = new Uint8Array(3);
    await Promise.all([r0.recv(3, 1, into), world.transports[3]?.send(0, 1, Uint8Array.of(1, 2, 3))]);
    assert.deepEqual([...into], [1, 2, 3]);
    await world.close();
  });

  it('still delivers what a peer sent right before it closed', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    await a.send(1, 1, pattern(50_000, 1));
    await a.close();
    await delay(100); // b has seen both connections end
    const into = new Uint8Array(50_000);
    await b.recv(0, 1, into);
    assert.ok(equalBytes(into, pattern(50_000, 1)));
    await assert.rejects(b.recv(0, 1, new Uint8Array(1)), PeerFailureError);
    await assert.rejects(b.send(0, 1, new Uint8Array(1)), PeerFailureError);
    await world.close();
  });

  it('a recv timeout names the address and tears the link down, on both sides', kTestTimeout, async () => {
    const world = await makeWorld(2, { ioTimeoutMs: 200 });
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    const failures: number[] = [];
    b.onPeerFailure((peer) => failures.push(peer));
    const started = performance.now();
    await assert.rejects(
      b.recv(0, 42, new Uint8Array(8)),
      (e) =>
        e instanceof TimeoutError &&
        /recv from rank 0 \(127\.0\.0\.1:\d+\) with tag 42 made no progress for 200 ms/.test(e.message),
    );
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 195 && elapsed < 1500, `timed out after ${elapsed} ms`);
    assert.deepEqual(failures, [0]);
    await assert.rejects(a.recv(1, 1, new Uint8Array(1)), PeerFailureError); // the peer sees the teardown
    await world.close();
  });

  it('close() leaves no socket or timer behind, with an op pending', kTestTimeout, async () => {
    const before = await liveHandles();
    const world = await makeWorld(3, { ioTimeoutMs: 60_000 });
    const [a] = world.transports;
    assert.ok(a);
    const pending = assert.rejects(
      a.recv(1, 1, new Uint8Array(4)),
      (e) => e instanceof ShutdownError && /rank 0/.test(e.message),
    );
    await world.close();
    await pending;
    assert.deepEqual(await liveHandles(), before);
  });

  it("tcpTransportConfig: the job's settings, and a shared-memory lane slot per pipelined segment", () => {
    const config = resolveConfig(
      { rank: 2, size: 4, storeAddress: '10.0.0.1:29500', address: '10.0.0.3', jobId: 'j', secret: 's', ioTimeoutMs: 7000 },
      {},
    );
    const log = { warn() {}, info() {} };
    assert.deepEqual(tcpTransportConfig(config, log), {
      rank: 2,
      size: 4,
      storeAddress: { host: '10.0.0.1', port: 29500 },
      hostStore: false,
      storeOwner: 'rank 0',
      bindHost: '10.0.0.3',
      advertiseHost: '10.0.0.3',
      jobId: 'j',
      secret: 's',
      timeouts: { connectMs: config.startTimeoutMs, ioMs: 7000 },
      heartbeatMs: config.heartbeatMs,
      localSockets: true,
      sharedMemory: { dir: '/dev/shm', slots: kDefaultPipelineDepth, slotBytes: config.segmentBytes, minBytes: 64 * 1024 },
      log,
    });
    const plain = tcpTransportConfig(resolveConfig({ networkInterface: 'eth0', sharedMemory: false, unixSockets: false }, {}));
    assert.equal(plain.hostStore, true);
    assert.equal(plain.networkInterface, 'eth0');
    assert.equal(plain.localSockets, false);
    for (const key of ['bindHost', 'advertiseHost', 'secret', 'sharedMemory', 'log']) assert.ok(!(key in plain), key);
  });
});
