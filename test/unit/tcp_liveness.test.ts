/**
 * Liveness of the TCP transport while idle and while active (../../src/transport/liveness.ts, tcp_transport.ts): an
 * idle transport schedules nothing and writes nothing; an active one pings, and fails a peer
 * that does not answer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PeerFailureError } from '../../src/core/errors.js';
import { kSilentIntervals, Liveness, type LivenessLink } from '../../src/transport/liveness.js';
import { PendingOp } from '../../src/transport/pending_op.js';
import { Watchdog } from '../../src/transport/watchdog.js';
import { delay, freeze, makeWorld, type World } from './tcp_test_helpers.js';

const kTestTimeout = { timeout: 15_000 };
const kIntervalMs = 50;
const kIoTimeoutMs = 300;

/** Bytes moved so far on every socket of the world. */
function wireBytes(world: World): number {
  let total = 0;
  for (const links of world.links) {
    for (const link of links) total += link.recvSocket.bytesRead + link.sendSocket.bytesWritten;
  }
  return total;
}

/** Counts calls to the timer functions during `body`: nothing may be scheduled. */
async function countScheduling(body: () => Promise<void>): Promise<number> {
  const saved = { setTimeout, setInterval, setImmediate };
  let calls = 0;
  const counted = <F extends (...args: never[]) => unknown>(fn: F): F =>
    ((...args: Parameters<F>) => {
      calls++;
      return fn(...args);
    }) as F;
  globalThis.setTimeout = counted(saved.setTimeout);
  globalThis.setInterval = counted(saved.setInterval);
  globalThis.setImmediate = counted(saved.setImmediate);
  try {
    await body();
  } finally {
    Object.assign(globalThis, saved);
  }
  return calls;
}

/** Waits (bounded) until `done()`; false if it never was. */
async function until(done: () => boolean, limitMs: number): Promise<boolean> {
  for (const start = performance.now(); performance.now() - start < limitMs; await delay(10)) if (done()) return true;
  return done();
}

async function withWorld(size: number, body: (world: World) => Promise<void>, frozen = -1): Promise<void> {
  const world = await makeWorld(size, (rank) => ({
    shareFate: true,
    ioTimeoutMs: kIoTimeoutMs,
    heartbeatMs: rank === frozen ? 0 : kIntervalMs,
  }));
  try {
    await body(world);
  } finally {
    await world.close();
  }
}

describe('TcpTransport liveness', () => {
  it('an idle pair of transports schedules nothing and writes nothing', kTestTimeout, () =>
    withWorld(2, async (world) => {
      const [t0, t1] = world.transports;
      assert.ok(t0 && t1);
      const into = new Uint8Array(4);
      await Promise.all([t0.send(1, 7, Uint8Array.of(1, 2, 3, 4)), t1.recv(0, 7, into)]);
      assert.deepEqual([...into], [1, 2, 3, 4]);
      // Control: while the engine says it is active, pings flow and the timer runs.
      t0.setActive(true);
      const activeFrom = wireBytes(world);
      await delay(6 * kIntervalMs);
      assert.ok(t0.watching, 'an active transport watches its peers');
      assert.ok(wireBytes(world) > activeFrom, 'an active transport pings');
      t0.setActive(false);
      // Liveness stops within an interval or two; the op watchdog's one-shot check passes once.
      assert.ok(await until(() => !t0.watching && !t1.watching, 20 * kIntervalMs), 'liveness stopped');
      await delay(kIoTimeoutMs + 2 * kIntervalMs);
      const idleFrom = wireBytes(world);
      const cpuFrom = process.cpuUsage();
      const calls = await countScheduling(() => delay(8 * kIntervalMs));
      const cpu = process.cpuUsage(cpuFrom);
      assert.equal(calls, 1, 'only the test itself scheduled a timer'); // delay() above
      assert.equal(wireBytes(world), idleFrom, 'no byte moved while idle');
      assert.ok(!t0.watching && !t1.watching);
      assert.ok(cpu.user + cpu.system < 50_000, `idle CPU ${cpu.user + cpu.system} µs`);
    }),
  );

  it('a peer that froze while the job was idle fails the next op within a few intervals', kTestTimeout, () =>
    withWorld(
      2,
      async (world) => {
        const [t0] = world.transports;
        assert.ok(t0);
        const failures: number[] = [];
        t0.onPeerFailure((peer) => failures.push(peer));
        freeze(world, 1);
        // Idle: nobody watches, nothing fails, however long it lasts.
        await delay(2 * kIoTimeoutMs);
        assert.deepEqual(failures, []);
        assert.ok(!t0.watching);
        const started = performance.now();
        await assert.rejects(
          t0.recv(1, 3, new Uint8Array(1)),
          (e) => e instanceof PeerFailureError && e.peerRank === 1 && /answer to a ping/.test(e.message),
        );
        const elapsed = performance.now() - started;
        // Two intervals to answer the first ping, then the next tick: not the I/O timeout again.
        assert.ok(elapsed >= 2 * kIntervalMs - 5 && elapsed < kIoTimeoutMs, `detected after ${elapsed} ms`);
      },
      1,
    ),
  );

  it('an idle rank answers the pings of an active one and schedules nothing itself', kTestTimeout, () =>
    withWorld(2, async (world) => {
      const [t0, t1] = world.transports;
      assert.ok(t0 && t1);
      const failures: number[] = [];
      for (const t of world.transports) t.onPeerFailure((peer) => failures.push(peer));
      t0.setActive(true);
      await delay(3 * kIoTimeoutMs);
      assert.deepEqual(failures, []);
      assert.ok(t0.watching && !t1.watching);
      t0.setActive(false);
    }),
  );
});

/** A peer link whose answers the test controls. */
class FakeLink implements LivenessLink {
  heardAt = performance.now();
  pings = 0;
  answers = true;
  lastHeard(): number {
    return this.heardAt;
  }
  backlog(): number {
    return 0;
  }
  ping(): void {
    this.pings++;
    if (this.answers) setImmediate(() => (this.heardAt = performance.now()));
  }
  usable(): boolean {
    return true;
  }
}

describe('Liveness', () => {
  it('pings only while wanted or unanswered, then disarms', kTestTimeout, async () => {
    const peer = new FakeLink();
    let wanted = true;
    const silent: number[] = [];
    const liveness = new Liveness({
      size: 2,
      intervalMs: 20,
      silenceMs: 60,
      links: [undefined, peer],
      wanted: () => wanted,
      onSilent: (p) => silent.push(p),
    });
    assert.equal(liveness.running, false, 'nothing is armed before activation');
    liveness.activate();
    assert.equal(liveness.running, true);
    // Every interval while wanted (bounded wait: a loaded machine's timers run late).
    assert.ok(await until(() => peer.pings >= 2, 2000), `${peer.pings} pings`);
    wanted = false;
    assert.ok(await until(() => !liveness.running, 2000), 'disarmed once not wanted');
    const pings = peer.pings;
    await delay(100);
    assert.equal(peer.pings, pings);
    // An unanswered ping keeps it armed even when not wanted, until the peer is failed.
    peer.answers = false;
    peer.heardAt -= 1000;
    liveness.activate();
    assert.ok(await until(() => silent.length > 0, 3000), 'the silent peer was failed');
    assert.deepEqual(silent.slice(0, 1), [1]);
    liveness.stop();
    assert.equal(liveness.running, false);
  });
});

describe('the silence limit', () => {
  it('a peer that stops answering is failed after four intervals, well before a long I/O timeout', kTestTimeout, async () => {
    const peer = new FakeLink();
    const silent: { peer: number; at: number }[] = [];
    const liveness = new Liveness({
      size: 2,
      intervalMs: 50,
      silenceMs: 30_000,
      links: [undefined, peer],
      wanted: () => true,
      onSilent: (p) => silent.push({ peer: p, at: performance.now() }),
    });
    liveness.activate();
    await delay(300); // answered pings: nothing happens
    assert.equal(silent.length, 0);
    peer.answers = false;
    const stoppedAt = peer.heardAt;
    assert.ok(await until(() => silent.length > 0, 3000), 'the silent peer was failed');
    liveness.stop();
    const after = (silent[0]?.at ?? 0) - stoppedAt;
    assert.equal(silent[0]?.peer, 1);
    // At the limit (a tick is due then), give or take a loaded machine's late timers: not 30 s.
    assert.ok(
      after >= kSilentIntervals * 50 - 5 && after < kSilentIntervals * 50 + 100,
      `failed ${after} ms after it was last heard`,
    );
  });

  it(
    'the op watchdog expires an op to a peer unheard for the limit, and waits the I/O timeout for one that is heard',
    kTestTimeout,
    async () => {
      const pending = new Set<PendingOp>();
      const heardAt = [0, 0, performance.now()];
      const expired: { peer: number; at: number; silenceMs: number | undefined }[] = [];
      const watchdog = new Watchdog({
        ioTimeoutMs: 1000,
        pending,
        heardSince: (peer, since) => (heardAt[peer] ?? 0) >= since,
        recheckMs: 50,
        onExpired: (op, _idle, silenceMs) => {
          expired.push({ peer: op.peer, at: performance.now(), silenceMs });
          op.reject(new Error('expired'));
        },
      });
      const started = performance.now();
      const ops = [1, 2].map(
        (peer) =>
          new PendingOp(
            'send',
            peer,
            0,
            pending,
            () => {},
            () => {},
          ),
      );
      watchdog.ensure();
      // Peer 2 keeps being heard (it answers pings); peer 1 never is.
      const hearing = setInterval(() => (heardAt[2] = performance.now()), 20);
      try {
        assert.ok(await until(() => expired.length === 2, 3000), `${expired.length} expired`);
      } finally {
        clearInterval(hearing);
        watchdog.stop();
      }
      const [first, second] = expired;
      assert.equal(first?.peer, 1);
      assert.ok(
        (first?.at ?? 0) - started < 1000 && (first?.at ?? 0) - started >= kSilentIntervals * 50 - 5,
        'silent: at the limit',
      );
      assert.equal(first?.silenceMs, kSilentIntervals * 50, 'silent: the limit is reported, for the error to name');
      assert.equal(second?.peer, 2);
      assert.ok((second?.at ?? 0) - started >= 1000 - 5, 'heard: at the I/O timeout');
      assert.equal(second?.silenceMs, undefined, 'heard: expired by the I/O timeout');
      assert.equal(ops.filter((op) => !op.done).length, 0);
    },
  );
});
