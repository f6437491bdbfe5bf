/**
 * Shared fate, liveness and goodbyes of the TCP transport (tcp_transport.ts, liveness.ts):
 * one failure breaks every link of every rank, naming the same rank everywhere; a silent rank
 * is found by the active ranks that ping it; a clean close is a departure, not a failure.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PeerFailureError } from '../../src/core/errors.js';
import type { TcpTransportOptions } from '../../src/transport/tcp/tcp_transport.js';
import { delay, freeze, makeWorld, type World } from './tcp_test_helpers.js';

const kTestTimeout = { timeout: 15_000 };

function namesRank(rank: number, message: RegExp = /./): (e: unknown) => boolean {
  return (e) => e instanceof PeerFailureError && e.peerRank === rank && message.test(e.message);
}

/** Runs `body` on a world of `size` ranks and always closes it. */
async function withWorld(
  size: number,
  options: Partial<TcpTransportOptions> | ((rank: number) => Partial<TcpTransportOptions>),
  body: (world: World) => Promise<void>,
): Promise<void> {
  const world = await makeWorld(size, options);
  try {
    await body(world);
  } finally {
    await world.close();
  }
}

describe('TcpTransport shared fate', () => {
  it('a crashed rank fails every pending op on every rank, even between two live ranks', kTestTimeout, () =>
    withWorld(4, { shareFate: true }, async (world) => {
      const [t0, t1, , t3] = world.transports;
      assert.ok(t0 && t1 && t3);
      const between = t0.recv(1, 9, new Uint8Array(4)); // rank 1 will never send it
      const fromDead = t3.recv(2, 9, new Uint8Array(4));
      const failures: number[][] = [];
      for (const t of world.transports) t.onPeerFailure((peer, error) => failures.push([t.rank, peer, error.peerRank ?? -1]));
      for (const link of world.links[2] ?? []) {
        link.recvSocket.destroy();
        link.sendSocket.destroy();
      }
      await assert.rejects(between, namesRank(2));
      await assert.rejects(fromDead, namesRank(2));
      await assert.rejects(t1.send(0, 1, Uint8Array.of(1)), namesRank(2));
      await delay(50);
      // Every survivor's handler ran once for each of its peers, always naming rank 2.
      for (const rank of [0, 1, 3]) {
        const seen = failures.filter(([r]) => r === rank).map(([, peer, named]) => [peer, named]);
        assert.deepEqual(
          seen.sort(),
          [0, 1, 2, 3].filter((p) => p !== rank).map((p) => [p, 2]),
        );
      }
    }),
  );

  it('a silent rank is failed by the ranks that watch it, and every rank names it', kTestTimeout, () =>
    // Rank 2 reads nothing and answers no ping (as if stopped); the others ping every 50 ms.
    withWorld(
      4,
      (rank) => ({ shareFate: true, ioTimeoutMs: 300, heartbeatMs: rank === 2 ? 0 : 50 }),
      async (world) => {
        const [t0, t1] = world.transports;
        assert.ok(t0 && t1);
        freeze(world, 2);
        const started = performance.now();
        // As in a ring step: rank 0 waits for rank 1, which waits for the silent rank 2. Rank 1 is
        // heard from meanwhile, so rank 0 does not blame it. Rank 0 may find rank 2 itself, or be told.
        const waiting = assert.rejects(t1.recv(2, 5, new Uint8Array(1)));
        const pending = t0.recv(1, 5, new Uint8Array(1));
        await assert.rejects(
          pending,
          namesRank(2, /^rank 2 (failed: .*\(reported by rank [13]\)|\(127\.0\.0\.1:\d+\): sent nothing for \d+ ms)/),
        );
        await waiting;
        const elapsed = performance.now() - started;
        // The silence limit: four 50 ms intervals (liveness.ts), under the 300 ms I/O timeout.
        assert.ok(elapsed >= 150 && elapsed < 2000, `detected after ${elapsed} ms`);
        await assert.rejects(t1.send(0, 1, Uint8Array.of(1)), namesRank(2));
      },
    ),
  );

  it('a silent rank is found by pings alone while the engine is active, with no op pending', kTestTimeout, () =>
    withWorld(
      3,
      (rank) => ({ shareFate: true, ioTimeoutMs: 300, heartbeatMs: rank === 1 ? 0 : 50 }),
      async (world) => {
        const failures: [number, string][] = [];
        for (const t of world.transports) t.onPeerFailure((_peer, error) => failures.push([t.rank, error.message]));
        freeze(world, 1);
        world.transports[2]?.setActive(true);
        await delay(700);
        const fromRank0 = failures.filter(([rank]) => rank === 0).map(([, message]) => message);
        assert.ok(fromRank0.length > 0, 'rank 0 saw no failure');
        assert.match(
          fromRank0[0] ?? '',
          /^rank 1 failed: sent nothing for \d+ ms, not even a heartbeat in answer to a ping.*\(reported by rank 2\)$/,
        );
      },
    ),
  );

  it('answered pings keep an active job alive well past the I/O timeout', kTestTimeout, () =>
    withWorld(3, { shareFate: true, ioTimeoutMs: 200, heartbeatMs: 50 }, async (world) => {
      const failures: number[] = [];
      for (const t of world.transports) t.onPeerFailure((peer) => failures.push(peer));
      for (const t of world.transports) t.setActive(true);
      await delay(800);
      assert.deepEqual(failures, []);
      const into = new Uint8Array(2);
      await Promise.all([world.transports[2]?.recv(0, 1, into), world.transports[0]?.send(2, 1, Uint8Array.of(4, 2))]);
      assert.deepEqual([...into], [4, 2]);
    }),
  );

  it('a clean close is a departure: the peers are told, nothing is passed on', kTestTimeout, () =>
    withWorld(3, { shareFate: true, heartbeatMs: 50, ioTimeoutMs: 1000 }, async (world) => {
      const [t0, t1, t2] = world.transports;
      assert.ok(t0 && t1 && t2);
      const stillFine = t1.recv(0, 3, new Uint8Array(1));
      await t2.close();
      await delay(100);
      await assert.rejects(t0.send(2, 1, Uint8Array.of(1)), namesRank(2, /has shut down \(left the job\)/));
      await t0.send(1, 3, Uint8Array.of(8));
      await stillFine;
    }),
  );
});
