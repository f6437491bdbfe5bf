import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { encodeHeader, kHeaderBytes, kKindData } from '../../src/transport/tcp/framing.js';
import { bigPattern, delay, equalBytes, liveHandles, makeWorld, pattern } from './tcp_test_helpers.js';

const kTestTimeout = { timeout: 30_000 };

/** Resolves once `transport` has received a control message from `peer` (so earlier data has arrived too). */
function fence(sender: { sendControl(p: number, b: Uint8Array): Promise<void> }, receiverWaits: Promise<void>, to: number) {
  return Promise.all([sender.sendControl(to, Uint8Array.of(0xfe)), receiverWaits]);
}

describe('TcpTransport', () => {
  it('delivers FIFO per (peer, tag) whichever side comes first', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    // Posted before: recvs wait on two tags in an order unlike the sends.
    const early = [new Uint8Array(100), new Uint8Array(100), new Uint8Array(7)];
    const earlyDone = Promise.all([
      b.recv(0, 2, early[0] as Uint8Array),
      b.recv(0, 1, early[2] as Uint8Array),
      b.recv(0, 2, early[1] as Uint8Array),
    ]);
    await Promise.all([a.send(1, 1, pattern(7, 1)), a.send(1, 2, pattern(100, 2)), a.send(1, 2, pattern(100, 3))]);
    await earlyDone;
    assert.ok(equalBytes(early[0] as Uint8Array, pattern(100, 2)));
    assert.ok(equalBytes(early[1] as Uint8Array, pattern(100, 3)));
    assert.ok(equalBytes(early[2] as Uint8Array, pattern(7, 1)));

    // Posted after the data arrived (the control fence proves it arrived).
    let arrived: () => void = () => {};
    b.onControl(() => arrived());
    await Promise.all([a.send(1, 5, pattern(300, 5)), a.send(1, 6, pattern(40, 6)), a.send(1, 5, pattern(300, 7))]);
    await fence(a, new Promise((r) => (arrived = r)), 1);
    const late = [new Uint8Array(40), new Uint8Array(300), new Uint8Array(300)];
    await Promise.all([
      b.recv(0, 6, late[0] as Uint8Array),
      b.recv(0, 5, late[1] as Uint8Array),
      b.recv(0, 5, late[2] as Uint8Array),
    ]);
    assert.ok(equalBytes(late[0] as Uint8Array, pattern(40, 6)));
    assert.ok(equalBytes(late[1] as Uint8Array, pattern(300, 5)));
    assert.ok(equalBytes(late[2] as Uint8Array, pattern(300, 7)));
    await world.close();
  });

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

  it('handles zero-length and many small messages in order', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    await Promise.all([b.recv(0, 9, new Uint8Array(0)), a.send(1, 9, new Uint8Array(0))]);
    await a.send(1, 9, new Uint8Array(0));
    await b.recv(0, 9, new Uint8Array(0));

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

  it('delivers control messages in order per peer, queued until a handler is set', kTestTimeout, async () => {
    const world = await makeWorld(3);
    const [r0, r1, r2] = world.transports as [
      (typeof world.transports)[0],
      (typeof world.transports)[0],
      (typeof world.transports)[0],
    ];
    await Promise.all(Array.from({ length: 200 }, (_, i) => r1.sendControl(0, Uint8Array.of(1, i))));
    await delay(50);
    const seen = new Map<number, number[]>([
      [1, []],
      [2, []],
    ]);
    let total = 0;
    let done: () => void = () => {};
    const all = new Promise<void>((r) => (done = r));
    r0.onControl((peer, payload) => {
      seen.get(peer)?.push(payload[1] as number);
      if (++total === 600) done();
    });
    await Promise.all([
      ...Array.from({ length: 200 }, (_, i) => r2.sendControl(0, Uint8Array.of(2, i))),
      ...Array.from({ length: 200 }, (_, i) => r1.sendControl(0, Uint8Array.of(1, 200 + i))),
    ]);
    await all;
    assert.deepEqual(
      seen.get(1),
      Array.from({ length: 400 }, (_, i) => i & 0xff),
    );
    assert.deepEqual(
      seen.get(2),
      Array.from({ length: 200 }, (_, i) => i),
    );
    await world.close();
  });

  it('exchanges all-to-all among 4 ranks', kTestTimeout, async () => {
    const world = await makeWorld(4);
    const ops: Promise<void>[] = [];
    const got = new Map<string, Uint8Array>();
    for (const t of world.transports) {
      for (let peer = 0; peer < 4; peer++) {
        if (peer === t.rank) continue;
        const into = new Uint8Array(70_000 + peer);
        got.set(`${peer}->${t.rank}`, into);
        ops.push(t.recv(peer, 4, into), t.send(peer, 4, pattern(70_000 + t.rank, t.rank * 10 + peer)));
      }
    }
    await Promise.all(ops);
    for (const [key, into] of got) {
      const [from, to] = key.split('->').map(Number) as [number, number];
      assert.ok(equalBytes(into, pattern(70_000 + from, from * 10 + to)), key);
    }
    await world.close();
  });

  it('rejects a length mismatch with ProtocolError and keeps the link', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const [a, b] = world.transports as [(typeof world.transports)[0], (typeof world.transports)[0]];
    // Posted first, with the wrong size.
    const wrong = b.recv(0, 1, new Uint8Array(10));
    await a.send(1, 1, pattern(12, 1));
    await assert.rejects(
      wrong,
      (e) => e instanceof ProtocolError && /rank 0 .* tag 1 has 12 bytes but the recv expects 10/.test(e.message),
    );
    // Arrived first (large, so it is staged), then a recv of the wrong size.
    await a.send(1, 2, pattern(100_000, 2));
    await assert.rejects(b.recv(0, 2, new Uint8Array(99_999)), ProtocolError);
    // The link still works, and FIFO continues after the discarded messages.
    const ok = new Uint8Array(5);
    await Promise.all([b.recv(0, 1, ok), a.send(1, 1, pattern(5, 3))]);
    assert.ok(equalBytes(ok, pattern(5, 3)));
    await world.close();
  });

  it('fails every op with a dead peer with PeerFailureError naming it; others go on', kTestTimeout, async () => {
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
    await assert.rejects(r0.send(2, 1, Uint8Array.of(1)), PeerFailureError);
    await assert.rejects(r0.recv(2, 1, new Uint8Array(1)), PeerFailureError);
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

  it('times out a recv without progress, naming peer and tag, and tears the link down', kTestTimeout, async () => {
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

  it('validates arguments', kTestTimeout, async () => {
    const world = await makeWorld(2);
    const a = world.transports[0];
    assert.ok(a);
    await assert.rejects(a.send(0, 1, new Uint8Array(1)), InvalidArgumentError);
    await assert.rejects(a.send(2, 1, new Uint8Array(1)), InvalidArgumentError);
    await assert.rejects(a.recv(1, -1, new Uint8Array(1)), InvalidArgumentError);
    await assert.rejects(a.recv(1, 2 ** 32, new Uint8Array(1)), InvalidArgumentError);
    await world.close();
  });

  it('close() rejects pending ops with ShutdownError, is idempotent, and leaves no handles', kTestTimeout, async () => {
    const before = await liveHandles();
    const world = await makeWorld(3, { ioTimeoutMs: 60_000 });
    const [a] = world.transports;
    assert.ok(a);
    const pending = assert.rejects(
      a.recv(1, 1, new Uint8Array(4)),
      (e) => e instanceof ShutdownError && /rank 0/.test(e.message),
    );
    await a.close();
    await pending;
    await assert.rejects(a.send(1, 1, new Uint8Array(1)), ShutdownError);
    await a.close();
    await world.close();
    assert.deepEqual(await liveHandles(), before);
  });
});
