/**
 * The conformance suite in process: every case of cases/index.ts (the format: cases/case.ts),
 * on every rank of a world of N ranks at once, over three backends:
 *
 * - memory, N = 4: the N ranks in this thread, each a real Engine over the memory
 *   transport behind the public facade (test/helpers/local_engine.ts). It skips the ...Sync
 *   cases (the engines run in the caller's thread, which a ...Sync call would block for good).
 * - tcp, N = 1..4: the N ranks each with its engine in a worker thread, over loopback TCP
 *   (test/helpers/world.ts). It runs the ...Sync cases for N = 1 only: the N callers share this
 *   thread, so with more ranks a ...Sync call would block it before the others have called.
 * - tcp with the engines on the caller's thread (engineThread: false), N = 3: the N ranks and
 *   their engines all in this thread, over loopback TCP; without the ...Sync cases (refused on
 *   such a thread) and the 2^20 + 3 element ones (the algorithms are tcp's).
 * - web, N = 2: as tcp, over loopback WebSockets (the web backend's Node ranks, the store hosted by the
 *   test): the algorithms are the same, so larger worlds would test nothing of
 *   the web links that this one and the browser ranks' jobs (multiprocess/browser_ranks.test.ts:
 *   2 Node ranks and 2 tabs, 3 tabs) do not, and cost CI minutes.
 *
 * Each runs every case in full, the 2^20 + 3 element allreduces of every dtype and op included
 * (tcp runs them on 3 ranks, uneven blocks, and leaves them to memory at 4), with the
 * references shared between the ranks of a
 * world (test/helpers/reference.ts). The algorithms are the same on every backend, so the
 * sizes are chosen to cover 1, 2, an odd size and a larger power of two (MPI runs 3 ranks)
 * within CI's 15 minutes on 2 cores.
 *
 * The MPI backend runs the same cases under mpirun: mpi_collectives.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import { startMemoryWorld } from '../helpers/local_engine.js';
import { startWebWorld, startWorld, stopWorld } from '../helpers/world.js';
import type { ConformanceCase } from './cases/case.js';
import { kCases } from './cases/index.js';
import { runOnWorld, sizeSkipReason } from './cases/runner.js';

interface InProcessBackend {
  name: string;
  sizes: readonly number[];
  start(size: number): Promise<RingReduce[]>;
  /** Why this backend cannot run `c` with `size` ranks, or undefined. */
  skipReason(c: ConformanceCase, size: number): string | undefined;
}

/** A stalled case fails in seconds rather than after the default minute. */
const kStallTimeoutMs = 20_000;
const kSharedThread =
  'the ranks share this thread: a ...Sync call would block it before the other ranks have called (MPI runs it)';

const kBackends: readonly InProcessBackend[] = [
  {
    name: 'memory',
    sizes: [4],
    start: async (size) => startMemoryWorld(size, { stallTimeoutMs: kStallTimeoutMs }),
    skipReason: (c) =>
      c.needsSync ? "...Sync calls block the caller's thread, where every engine of the memory backend runs" : undefined,
  },
  {
    name: 'tcp',
    sizes: [1, 2, 3, 4],
    start: (size) => startWorld(size, { stallTimeoutMs: kStallTimeoutMs }),
    skipReason: (c, size) => {
      if (c.needsSync && size > 1) return kSharedThread;
      if (!c.name.includes('2^20 + 3') || size === 1) return undefined;
      if (size === 2) return 'tcp runs it on 3 ranks (uneven blocks), memory on 4';
      return size === 4 ? 'the memory backend runs it on 4 ranks' : undefined;
    },
  },
  {
    name: "tcp, engine on the caller's thread",
    sizes: [3],
    start: (size) => startWorld(size, { stallTimeoutMs: kStallTimeoutMs, engineThread: false }),
    skipReason: (c) => {
      if (c.needsSync) return '...Sync calls are refused where the engine runs on the calling thread';
      return c.name.includes('2^20 + 3') ? 'tcp runs it with the engine on its own thread' : undefined;
    },
  },
  {
    name: 'web',
    sizes: [2],
    start: (size) => startWebWorld(size, { stallTimeoutMs: kStallTimeoutMs }),
    skipReason: (c) => (c.needsSync ? kSharedThread : undefined),
  },
];

for (const backend of kBackends) {
  for (const size of backend.sizes) {
    describe(`${backend.name}, ${size} rank${size > 1 ? 's' : ''}`, () => {
      let world: RingReduce[] = [];
      before(async () => {
        world = await backend.start(size);
      });
      after(async () => {
        await stopWorld(world);
      });
      for (const c of kCases) {
        const skip = sizeSkipReason(c, size) ?? backend.skipReason(c, size);
        test(c.name, skip ? { skip } : {}, () => runOnWorld(c, world));
      }
    });
  }
}

test("tcp with the engine on the caller's thread: a ...Sync call fails at once, naming the setting, and the rank goes on", async () => {
  const world = await startWorld(1, { engineThread: false });
  try {
    assert.throws(() => world[0]?.allreduceSync(new Float32Array(1), { name: 'sync' }), /RINGREDUCE_ENGINE_THREAD=0/);
    const sum = await world[0]?.allreduce(new Float32Array([2]), { name: 'sync' });
    assert.deepEqual(Array.from(sum ?? []), [2]);
  } finally {
    await stopWorld(world);
  }
});

test("tcp with the engine on the caller's thread: a burst of named allreduces runs as one fused collective", async () => {
  // The burst's submissions are all delivered before the report (engine_in_thread.ts), even
  // with no burst hold at all.
  const world = await startWorld(2, { engineThread: false, burstHoldMs: 0 });
  try {
    const steps = 6;
    const tensors = 20;
    for (let step = 0; step < steps; step++) {
      const sums = await Promise.all(
        world.map((rr) =>
          // 4 KiB each: alone each would go eagerly, but the burst passes the 64 KiB a report
          // carries eagerly on 2 ranks, so every tensor runs in an execution.
          Promise.all(Array.from({ length: tensors }, (_, i) => rr.allreduce(new Float32Array(1024).fill(i), { name: `g${i}` }))),
        ),
      );
      for (const rank of sums)
        assert.deepEqual(
          rank.map((s) => s[0]),
          Array.from({ length: tensors }, (_, i) => 2 * i),
        );
    }
    for (const rr of world) {
      const { executed, executions } = rr.stats();
      assert.equal(executed, steps * tensors);
      assert.equal(executions, steps, `${executed} collectives in ${executions} runs`);
    }
  } finally {
    await stopWorld(world);
  }
});

test('memory backend: a ...Sync call fails at once, naming the reason, and the rank goes on', async () => {
  const world = startMemoryWorld(2);
  try {
    assert.throws(
      () => world[0]?.allreduceSync(new Float32Array(1), { name: 'sync' }),
      /allreduceSync 'sync' on rank 0: .*own thread/,
    );
    assert.throws(() => world[1]?.broadcastSync(new Int8Array(2), { name: 'bc' }), /broadcastSync 'bc' on rank 1/);
    // Nothing reached the engines: the name is free again.
    const sums = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1]), { name: 'sync' })));
    assert.deepEqual(
      sums.map((s) => s[0]),
      [2, 2],
    );
  } finally {
    await stopWorld(world);
  }
});
