/**
 * The failure semantics of the web backend, which are the TCP backend's (tcp_fate.test.ts): shared
 * fate with notices (a rank that did not see the failure learns it from the others), a goodbye
 * on a clean close (a departure breaks nothing), and liveness while active (a peer that stops
 * reading is found by its unanswered pings; an idle transport keeps no timer). Three Node ranks
 * through the backend factory over loopback WebSockets (web_test_helpers.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PeerFailureError } from '../../src/core/errors.js';
import type { WebTransport } from '../../src/transport/web/web_transport.js';
import { makeWebWorld, type WebWorld } from './web_test_helpers.js';

function transports(world: WebWorld): WebTransport[] {
  return world.handles.map((h) => h.transport as WebTransport);
}

/** The socket rank `from` dialed to rank `to` (the higher rank dials the lower). */
function dialedSocket(world: WebWorld, from: number, to: number) {
  const link = world.log.dialed.find(({ rank, url }) => rank === from && world.log.urls.get(url) === to);
  if (link === undefined) throw new Error(`rank ${from} did not dial rank ${to}`);
  return link.socket;
}

describe('web backend: shared fate, goodbyes, liveness', () => {
  it('a cut link breaks every rank: the one that saw nothing learns it from a notice, naming the rank', async () => {
    const world = await makeWebWorld(3);
    const [t0, t1, t2] = transports(world) as [WebTransport, WebTransport, WebTransport];
    try {
      const failures: string[] = [];
      t2.onPeerFailure((_, error) => failures.push(error.message));
      const pending = t2.recv(0, 5, new Uint8Array(1));
      world.log.cut(0, 1);
      await assert.rejects(
        pending,
        (e: unknown) => e instanceof PeerFailureError && /rank [01] failed: .*\(reported by rank [01]\)/.test(e.message),
      );
      // Every link of rank 2 failed with that one error, though its own links are intact.
      await assert.rejects(t2.send(1, 6, new Uint8Array(1)), PeerFailureError);
      assert.equal(new Set(failures).size, 1, failures.join(' | '));
      await assert.rejects(t0.recv(2, 7, new Uint8Array(1)), PeerFailureError);
      await assert.rejects(t1.recv(2, 7, new Uint8Array(1)), PeerFailureError);
    } finally {
      await world.close();
    }
  });

  it('a clean close is a departure: the peers are told, and what they have left goes on', async () => {
    const world = await makeWebWorld(3);
    const [t0, t1, t2] = transports(world) as [WebTransport, WebTransport, WebTransport];
    try {
      const pending = assert.rejects(
        t0.recv(1, 5, new Uint8Array(1)),
        (e: unknown) => e instanceof PeerFailureError && /rank 1 .* has shut down \(left the job\)/.test(e.message),
      );
      await t1.send(0, 4, Uint8Array.of(42));
      await world.handles[1]?.close();
      await pending;
      // The message sent just before the goodbye is still there; ranks 0 and 2 still talk.
      const into = new Uint8Array(1);
      await t0.recv(1, 4, into);
      assert.equal(into[0], 42);
      const between = new Uint8Array(3);
      await Promise.all([t0.send(2, 8, Uint8Array.of(1, 2, 3)), t2.recv(0, 8, between)]);
      assert.deepEqual([...between], [1, 2, 3]);
    } finally {
      await world.close();
    }
  });

  it('liveness: idle, no timer; active, a peer that stops reading is failed after its pings go unanswered', async () => {
    const world = await makeWebWorld(2, { heartbeatMs: 50, ioTimeoutMs: 400 });
    const [t0] = transports(world) as [WebTransport, WebTransport];
    try {
      assert.equal(t0.watching, false, 'idle: no timer');
      const failed = new Promise<PeerFailureError>((resolve) => t0.onPeerFailure((_, error) => resolve(error)));
      dialedSocket(world, 1, 0).pause(); // rank 1 reads nothing more from rank 0: no ping is answered
      const started = performance.now();
      t0.setActive(true);
      assert.equal(t0.watching, true);
      const error = await failed;
      const after = performance.now() - started;
      assert.match(error.message, /rank 1 .*sent nothing for \d+ ms, not even a heartbeat/);
      assert.ok(after >= 150 && after < 2000, `found after ${Math.round(after)} ms`);
    } finally {
      await world.close();
    }
  });
});
