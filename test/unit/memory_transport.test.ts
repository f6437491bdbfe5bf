import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { createMemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';

const bytes = (...values: number[]) => Uint8Array.from(values);

/** Runs `body` on a fresh world and closes it whatever happens. */
async function withWorld(
  size: number,
  options: MemoryWorldOptions,
  body: (world: ReturnType<typeof createMemoryWorld>) => Promise<void>,
): Promise<void> {
  const world = createMemoryWorld(size, options);
  try {
    await body(world);
  } finally {
    await world.closeAll();
  }
}

/** Whether `promise` is still pending after the delivery machinery has had time to run. */
async function isPending(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return !done;
}

describe('memory transport: data plane', () => {
  for (const options of [{}, { delivery: 'microtask' }, { jitter: { seed: 7 } }, { rendezvous: true }] as MemoryWorldOptions[]) {
    it(`matches first-in first-out per (peer, tag) ${JSON.stringify(options)}`, () =>
      withWorld(3, options, async ([a, b, c]) => {
        const sends = [
          a?.send(1, 5, bytes(1)),
          a?.send(1, 6, bytes(60)),
          c?.send(1, 5, bytes(30)),
          a?.send(1, 5, bytes(2)),
          a?.send(1, 5, bytes(3)),
        ];
        const got = [new Uint8Array(1), new Uint8Array(1), new Uint8Array(1), new Uint8Array(1), new Uint8Array(1)];
        // Tag 6 first, and rank 2 before rank 0: only (peer, tag) decides the match.
        await b?.recv(0, 6, got[0] as Uint8Array);
        await b?.recv(2, 5, got[1] as Uint8Array);
        await Promise.all([0, 1, 2].map((i) => b?.recv(0, 5, got[i + 2] as Uint8Array)));
        await Promise.all(sends);
        assert.deepEqual(
          got.map((g) => g[0]),
          [60, 30, 1, 2, 3],
        );
      }));
  }

  it('keeps order on every link under random delays', () =>
    withWorld(4, { jitter: { seed: 42, maxHops: 4 } }, async (world) => {
      const count = 50;
      const sends = world.slice(1).flatMap((t) => Array.from({ length: count }, (_, i) => t.send(0, 1, bytes(t.rank, i))));
      const seen = world.slice(1).map(async (t) => {
        for (let i = 0; i < count; i++) {
          const into = new Uint8Array(2);
          await world[0]?.recv(t.rank, 1, into);
          assert.deepEqual([...into], [t.rank, i]);
        }
      });
      await Promise.all([...sends, ...seen]);
    }));

  it('delivers asynchronously and reads the bytes only until send resolves', () =>
    withWorld(2, {}, async ([a, b]) => {
      const data = bytes(1, 2, 3);
      let resolved = false;
      const sent = a?.send(1, 0, data).then(() => {
        resolved = true;
      });
      assert.equal(resolved, false);
      await sent;
      data.fill(9); // the caller may reuse its buffer now
      const into = new Uint8Array(3);
      await b?.recv(0, 0, into);
      assert.deepEqual([...into], [1, 2, 3]);
    }));

  it('lands a message straight into a receive posted first, including an empty one', () =>
    withWorld(2, {}, async ([a, b]) => {
      const into = new Uint8Array(4);
      const empty = new Uint8Array(0);
      const received = Promise.all([b?.recv(0, 3, into), b?.recv(0, 3, empty)]);
      await Promise.all([a?.send(1, 3, bytes(4, 3, 2, 1)), a?.send(1, 3, new Uint8Array(0)), received]);
      assert.deepEqual([...into], [4, 3, 2, 1]);
    }));

  it('refuses a message of the wrong length with ProtocolError, posted or staged', () =>
    withWorld(2, {}, async ([a, b]) => {
      const posted = b?.recv(0, 1, new Uint8Array(2)) as Promise<void>;
      await a?.send(1, 1, bytes(1, 2, 3));
      await assert.rejects(posted, (e: unknown) => e instanceof ProtocolError && /3 bytes.*expects 2/.test(e.message));
      await a?.send(1, 2, bytes(1));
      await assert.rejects(b?.recv(0, 2, new Uint8Array(4)) as Promise<void>, ProtocolError);
      // The stream goes on: the next message matches normally.
      await a?.send(1, 1, bytes(7, 8));
      const into = new Uint8Array(2);
      await b?.recv(0, 1, into);
      assert.deepEqual([...into], [7, 8]);
    }));

  it('times out a receive with TimeoutError naming the peer and tag', () =>
    withWorld(3, { ioTimeoutMs: 30 }, async ([, b]) => {
      const started = Date.now();
      await assert.rejects(
        b?.recv(2, 77, new Uint8Array(1)) as Promise<void>,
        (e: unknown) => e instanceof TimeoutError && /rank 2/.test(e.message) && /tag 77/.test(e.message),
      );
      assert.ok(Date.now() - started >= 25);
    }));

  it('holds a rendezvous send until a receive takes it', () =>
    withWorld(2, { rendezvous: true }, async ([a, b]) => {
      const sent = a?.send(1, 0, bytes(5)) as Promise<void>;
      assert.equal(await isPending(sent), true);
      const into = new Uint8Array(1);
      await b?.recv(0, 0, into);
      await sent;
      assert.equal(into[0], 5);
    }));

  it('refuses a bad peer or tag', () =>
    withWorld(2, {}, async ([a]) => {
      await assert.rejects(a?.send(0, 0, bytes(1)) as Promise<void>, InvalidArgumentError);
      await assert.rejects(a?.recv(2, 0, bytes(1)) as Promise<void>, InvalidArgumentError);
      await assert.rejects(a?.send(1, -1, bytes(1)) as Promise<void>, InvalidArgumentError);
    }));
});

describe('memory transport: control plane', () => {
  it('delivers in order per peer, holding early messages until a handler is set', () =>
    withWorld(3, {}, async ([a, b, c]) => {
      await Promise.all([a?.sendControl(1, bytes(1)), a?.sendControl(1, bytes(2)), c?.sendControl(1, bytes(3))]);
      const got: Array<[number, number]> = [];
      const all = new Promise<void>((resolve) => {
        b?.onControl((peer, payload) => {
          got.push([peer, payload[0] as number]);
          if (got.length === 4) resolve();
        });
      });
      await a?.sendControl(1, bytes(4));
      await all;
      assert.deepEqual(
        got.filter(([peer]) => peer === 0).map(([, v]) => v),
        [1, 2, 4],
      );
      assert.deepEqual(
        got.filter(([peer]) => peer === 2),
        [[2, 3]],
      );
    }));
});

describe('memory transport: failures', () => {
  it('kill(rank): peers fail pending and later operations with PeerFailureError naming it, once per handler', () =>
    withWorld(3, {}, async (world) => {
      const [a, b, c] = world;
      const failures: Array<[number, number | undefined]> = [];
      a?.onPeerFailure((peer, error) => failures.push([peer, error.peerRank]));
      const pending = a?.recv(1, 0, new Uint8Array(1)) as Promise<void>;
      const ownPending = b?.recv(0, 0, new Uint8Array(1)) as Promise<void>;
      world.kill(1);
      const named = (e: unknown) => e instanceof PeerFailureError && e.peerRank === 1 && /rank 1/.test(e.message);
      await assert.rejects(pending, named);
      await assert.rejects(a?.send(1, 0, bytes(1)) as Promise<void>, named);
      await assert.rejects(c?.recv(1, 4, new Uint8Array(1)) as Promise<void>, named);
      await assert.rejects(ownPending, ShutdownError);
      assert.deepEqual(failures, [[1, 1]]);
      // The rest of the world still works.
      const into = new Uint8Array(1);
      await Promise.all([a?.send(2, 0, bytes(9)), c?.recv(0, 0, into)]);
      assert.equal(into[0], 9);
    }));

  it('breakLink(a, b): both sides fail, staged sends included, other links live on', () =>
    withWorld(3, { rendezvous: true }, async (world) => {
      const [a, b, c] = world;
      const seen: number[] = [];
      b?.onPeerFailure((peer) => seen.push(peer));
      const stagedSend = a?.send(1, 0, bytes(1)) as Promise<void>;
      assert.equal(await isPending(stagedSend), true);
      world.breakLink(0, 1);
      world.breakLink(1, 0); // already broken: no second notification
      await assert.rejects(stagedSend, (e: unknown) => e instanceof PeerFailureError && e.peerRank === 1);
      await assert.rejects(
        b?.recv(0, 0, new Uint8Array(1)) as Promise<void>,
        (e: unknown) => e instanceof PeerFailureError && e.peerRank === 0,
      );
      assert.deepEqual(seen, [0]);
      const into = new Uint8Array(1);
      await Promise.all([b?.send(2, 0, bytes(3)), c?.recv(1, 0, into)]);
      assert.equal(into[0], 3);
    }));

  it('close(): pending and later operations reject with ShutdownError; idempotent; peers see a failure', () =>
    withWorld(2, {}, async ([a, b]) => {
      const peerSaw: number[] = [];
      b?.onPeerFailure((peer) => peerSaw.push(peer));
      const pending = a?.recv(1, 0, new Uint8Array(1)) as Promise<void>;
      const peerPending = b?.recv(0, 0, new Uint8Array(1)) as Promise<void>;
      await a?.close();
      await a?.close();
      await assert.rejects(pending, ShutdownError);
      await assert.rejects(a?.send(1, 0, bytes(1)) as Promise<void>, ShutdownError);
      await assert.rejects(peerPending, PeerFailureError);
      assert.deepEqual(peerSaw, [0]);
    }));
});
