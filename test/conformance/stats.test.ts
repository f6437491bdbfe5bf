/**
 * rr.stats() counts exactly: after a known sequence of collectives (cached and new names, a fused
 * step, eager scalars, unnamed calls, a barrier, a send and recv, a mismatch that fails on every
 * rank), every rank's counters by operation, its totals and its cache hits are the numbers the
 * sequence implies, on the memory world (engines in this thread) and over TCP (engine threads,
 * the counters read from shared memory). Data-plane bytes are conserved: what all ranks sent,
 * all ranks received.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RingReduce } from '../../src/api/runtime.js';
import { resolveConfig } from '../../src/core/config.js';
import { MismatchError } from '../../src/core/errors.js';
import type { RankStats } from '../../src/engine/reporting/stats.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import { LocalEngine } from '../helpers/local_engine.js';
import { bounded } from '../helpers/real_worlds.js';
import { testEnv } from '../helpers/test_env.js';
import { startWorld } from '../helpers/world.js';

/** A LocalEngine that lets rr.stats() read its engine's counters. */
class CountedLocalEngine extends LocalEngine {
  get statsBuffer(): SharedArrayBuffer {
    return this.engine.stats.buffer;
  }
}

function startCountedMemoryWorld(size: number): RingReduce[] {
  const world = createMemoryWorld(size, { delivery: 'macrotask' });
  return world.map((transport, rank) => {
    const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error' }, testEnv());
    return RingReduce.withEngine(config, new CountedLocalEngine(config, transport));
  });
}

const kSize = 3;
const kWorlds = [
  { name: 'memory', start: async () => startCountedMemoryWorld(kSize) },
  { name: 'tcp', start: () => startWorld(kSize) },
] as const;

/** The sequence; every rank runs it, all ranks at once for each step. */
async function runSequence(world: readonly RingReduce[]): Promise<void> {
  const all = (call: (rr: RingReduce, rank: number) => Promise<unknown>) => Promise.all(world.map(call));
  // A named allreduce three times: the first goes to rank 0, the next two by cache id (40 KB:
  // past the eager limit of 3 ranks, 32 KiB, so an algorithm runs).
  for (let i = 0; i < 3; i++) await all((rr, r) => rr.allreduce(new Float32Array(10000).fill(r), { name: 'a' }));
  await all((rr) => rr.broadcast(new Float64Array(10), { name: 'b', root: 0 }));
  // Unnamed allgathers: never cached.
  for (let i = 0; i < 2; i++) await all((rr) => rr.allgather(new Int32Array(5)));
  await all((rr) => rr.barrier());
  // A training step of four 12 KiB gradients, twice: fused, then cached. Each alone would go
  // eagerly (at most 32 KiB on 3 ranks); together they pass that, so their reports withhold them.
  for (let step = 0; step < 2; step++) {
    await all((rr) => Promise.all([0, 1, 2, 3].map((g) => rr.allreduce(new Float32Array(3072), { name: `g${g}` }))));
  }
  // A scalar three times: the second and third are eager (their data rides with the ready round).
  for (let i = 0; i < 3; i++) await all((rr) => rr.allreduce(new Float32Array([1]), { name: 'loss' }));
  await Promise.all([
    world[0]?.send(new Float32Array(8), { to: 1, tag: 5 }),
    world[1]?.recv(new Float32Array(8), { from: 0, tag: 5 }),
  ]);
  // A mismatch: fails on every rank, counted as failed.
  const bad = await Promise.allSettled(world.map((rr, r) => rr.allreduce(new Float32Array(4 + r), { name: 'bad' })));
  for (const outcome of bad) {
    assert.equal(outcome.status, 'rejected');
    assert.ok((outcome as PromiseRejectedResult).reason instanceof MismatchError);
  }
}

function checkRank(stats: RankStats, rank: number): void {
  const where = `rank ${rank}`;
  const op = stats.byOp;
  assert.deepEqual(op.allreduce, { completed: 3 + 8 + 3, failed: 1, bytes: 3 * 40000 + 8 * 12288 + 3 * 4 }, where);
  assert.deepEqual(op.broadcast, { completed: 1, failed: 0, bytes: 80 }, where);
  assert.deepEqual(op.allgather, { completed: 2, failed: 0, bytes: 40 }, where);
  assert.deepEqual(op.barrier, { completed: 1, failed: 0, bytes: 0 }, where);
  assert.deepEqual(op.send, rank === 0 ? { completed: 1, failed: 0, bytes: 32 } : { completed: 0, failed: 0, bytes: 0 }, where);
  assert.deepEqual(op.recv, rank === 1 ? { completed: 1, failed: 0, bytes: 32 } : { completed: 0, failed: 0, bytes: 0 }, where);
  for (const unused of ['reducescatter', 'alltoall', 'reduce', 'gather', 'scatter', 'join'] as const) {
    assert.deepEqual(op[unused], { completed: 0, failed: 0, bytes: 0 }, `${where}: ${unused}`);
  }
  const p2p = rank <= 1 ? 1 : 0;
  const collectives = 14 + 1 + 2 + 1;
  assert.equal(stats.completed, collectives + p2p, where);
  assert.equal(stats.failed, 1, where);
  assert.equal(stats.submitted, collectives + p2p + 1, where);
  assert.equal(stats.pending, 0, where);
  assert.equal(stats.bytes, 218316 + 80 + 40 + 32 * p2p, where);
  // Misses: a, b, two unnamed allgathers, the barrier, g0..g3, loss, bad. Hits: a ×2, g0..g3, loss ×2.
  assert.equal(stats.cacheMisses, 11, where);
  assert.equal(stats.cacheHits, 8, where);
  assert.equal(stats.eager, 2, where);
  // Every completed collective ran in an execution, but the eager ones.
  assert.equal(stats.executed + stats.eager, collectives, where);
  assert.ok(stats.executions < stats.executed, `${where}: the step's gradients were fused (${stats.executions} runs)`);
  assert.equal(stats.fusionRatio, stats.executed / stats.executions, where);
  assert.ok(stats.negotiationMs > 0 && stats.executionMs > 0, where);
  assert.ok(stats.controlSentBytes > 0 && stats.controlReceivedBytes > 0, where);
  assert.ok(stats.controlSentMessages > 0 && stats.controlReceivedMessages > 0, where);
  assert.ok(stats.controlSentBytes > stats.controlSentMessages, `${where}: a message has bytes`);
}

for (const { name, start } of kWorlds) {
  describe(`rr.stats() on ${kSize} ranks, ${name}`, () => {
    test(
      'a known sequence of collectives gives exact counts on every rank',
      bounded(60_000, async () => {
        const world = await start();
        try {
          const before = world.map((rr) => rr.stats());
          for (const s of before) assert.equal(s.completed + s.submitted + s.sentBytes, 0);
          await runSequence(world);
          const stats = world.map((rr) => rr.stats());
          stats.forEach(checkRank);
          const sent = stats.reduce((sum, s) => sum + s.sentBytes, 0);
          const received = stats.reduce((sum, s) => sum + s.receivedBytes, 0);
          assert.ok(sent > 0);
          assert.equal(sent, received, 'data-plane bytes are conserved');
          // Reading is a snapshot: the same numbers twice when nothing runs.
          assert.deepEqual(world[2]?.stats().byOp, stats[2]?.byOp);
        } finally {
          await Promise.all(world.map((rr) => rr.shutdown()));
        }
      }),
    );
  });
}
