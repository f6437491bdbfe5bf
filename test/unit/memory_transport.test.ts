/**
 * What is the memory backend's own: asynchronous delivery, rendezvous delivery, and its fault
 * injection (kill, breakLink, a close seen by the peers). The transport contract, in every
 * delivery mode, is test/unit/transport_contract.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PeerFailureError, ShutdownError } from '../../src/core/errors.js';
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

describe('memory transport: delivery', () => {
  it('delivers asynchronously: a send is not resolved in the turn that made it', () =>
    withWorld(2, {}, async ([a, b]) => {
      let resolved = false;
      const sent = a?.send(1, 0, bytes(1, 2, 3)).then(() => {
        resolved = true;
      });
      assert.equal(resolved, false);
      const into = new Uint8Array(3);
      await Promise.all([sent, b?.recv(0, 0, into)]);
      assert.deepEqual([...into], [1, 2, 3]);
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

  it('close(): the peers see a broken link', () =>
    withWorld(2, {}, async ([a, b]) => {
      const peerSaw: number[] = [];
      b?.onPeerFailure((peer) => peerSaw.push(peer));
      const peerPending = b?.recv(0, 0, new Uint8Array(1)) as Promise<void>;
      await a?.close();
      await assert.rejects(peerPending, (e: unknown) => e instanceof PeerFailureError && e.peerRank === 0);
      assert.deepEqual(peerSaw, [0]);
    }));
});
