/**
 * Adasum: the algorithm over in-thread ranks against a direct float64 evaluation of the pairwise
 * tree (every rank with the same bits), fused tensors each with their own coefficients, zero
 * vectors, and through the facade: the op's argument checks, the mismatch every rank reports,
 * grouped and process-set calls.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adasumAllreduce } from '../../src/algorithms/adasum.js';
import type { RingReduce } from '../../src/api/runtime.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import { adasumReference as reference } from '../helpers/adasum_reference.js';
import { memoryEngineOf } from '../helpers/group_member.js';
import { startMemoryWorld } from '../helpers/local_engine.js';
import { onEveryRank } from './support/ranks.js';
import { randomArray, sameBytes, seeded } from './support/typed_data.js';

/** Runs adasum on every rank of a fresh memory world; returns each rank's buffer. */
async function runAdasum(inputs: readonly (Float32Array | Float64Array)[], counts?: readonly number[]) {
  const world = createMemoryWorld(inputs.length, { delivery: 'microtask', ioTimeoutMs: 5000 });
  const bufs = inputs.map((v) => v.slice());
  const pool = new BufferPool();
  try {
    await onEveryRank(world, (t, rank) => adasumAllreduce(t, bufs[rank] as Float32Array, 3, { pool }, counts));
  } finally {
    await world.closeAll();
  }
  return bufs;
}

function assertClose(got: ArrayLike<number>, want: Float64Array, tolerance: number, what: string): void {
  assert.equal(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    const error = Math.abs((got[i] as number) - (want[i] as number));
    assert.ok(error <= tolerance * (1 + Math.abs(want[i] as number)), `${what}: [${i}] ${got[i]} vs ${want[i]}`);
  }
}

describe('adasumAllreduce', () => {
  for (const size of [1, 2, 4, 8]) {
    it(`${size} ranks: the pairwise tree's result, float32 and float64, every length, the same bits on every rank`, async () => {
      const random = seeded(size * 31);
      for (const dtype of ['float32', 'float64'] as const) {
        for (const length of [0, 1, 2, 7, 13, 64]) {
          const inputs = Array.from({ length: size }, () => randomArray(dtype, length, random) as Float32Array | Float64Array);
          const bufs = await runAdasum(inputs);
          const what = `${dtype}, ${length} elements`;
          assertClose(bufs[0] as Float32Array, reference(inputs, [length]), dtype === 'float32' ? 1e-5 : 1e-12, what);
          for (const b of bufs) assert.ok(sameBytes(b, bufs[0] as Float32Array), `${what}: ranks agree`);
        }
      }
    });
  }

  it('is the sum of orthogonal vectors and the average of equal ones', async () => {
    const axes = Array.from({ length: 4 }, (_, r) => Float64Array.from({ length: 4 }, (_, i) => (i === r ? r + 1 : 0)));
    assert.deepEqual([...((await runAdasum(axes))[0] as Float64Array)], [1, 2, 3, 4]);
    const same = Array.from({ length: 4 }, () => Float64Array.from([3, -1, 0.5]));
    assert.deepEqual([...((await runAdasum(same))[0] as Float64Array)], [3, -1, 0.5]);
  });

  it('fused tensors: each tensor its own coefficients, pieces that straddle tensors included', async () => {
    const random = seeded(7);
    const counts = [3, 0, 10, 1, 5];
    for (const size of [2, 4, 8]) {
      const inputs = Array.from({ length: size }, () => randomArray('float64', 19, random) as Float64Array);
      const bufs = await runAdasum(inputs, counts);
      assertClose(bufs[0] as Float64Array, reference(inputs, counts), 1e-12, `${size} ranks`);
      for (const b of bufs) assert.ok(sameBytes(b, bufs[0] as Float64Array), `${size} ranks: ranks agree`);
    }
  });

  it('zero vectors: a zero partner leaves the other vector as it is; all zeros stay zeros (no NaN)', async () => {
    const v = Float32Array.from([1.5, -2, 0.25, 4, -0.5]);
    const zero = () => new Float32Array(5);
    const bufs = await runAdasum([zero(), v, zero(), zero()]);
    for (const b of bufs) assert.deepEqual([...b], [...v]);
    for (const b of await runAdasum([zero(), zero(), zero(), zero()])) assert.deepEqual([...b], [0, 0, 0, 0, 0]);
    // One tensor of a fused pair is zero on every rank: the other is combined, the zero one stays zero.
    const fused = [Float64Array.from([0, 0, 1, 2]), Float64Array.from([0, 0, 3, -1])];
    const out = (await runAdasum(fused, [2, 2]))[0] as Float64Array;
    assertClose(out, reference(fused, [2, 2]), 1e-15, 'fused');
    assert.ok(out.every((x) => Number.isFinite(x)));
  });

  it('refuses other rank counts and non-float buffers, naming what works', async () => {
    const world = createMemoryWorld(3);
    await assert.rejects(adasumAllreduce(world[0] as never, new Float32Array(4), 1), {
      name: 'InvalidArgumentError',
      message: 'adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...), got 3',
    });
    await assert.rejects(adasumAllreduce(world[0] as never, new Int32Array(4) as never, 1), InvalidArgumentError);
    await world.closeAll();
  });
});

describe("allreduce with op 'adasum'", () => {
  it('gives the tree on every rank; grouped tensors fused, each combined on its own', async () => {
    const ranks = startMemoryWorld(4);
    try {
      const random = seeded(11);
      const a = ranks.map(() => randomArray('float32', 9, random) as Float32Array);
      const b = ranks.map(() => randomArray('float32', 4, random) as Float32Array);
      const single = await Promise.all(ranks.map((rr, r) => rr.allreduce(a[r] as Float32Array, { op: 'adasum' })));
      assertClose(single[3] as Float32Array, reference(a, [9]), 1e-5, 'single');
      const grouped = await Promise.all(
        ranks.map((rr, r) => rr.groupedAllreduce([a[r] as Float32Array, b[r] as Float32Array], { op: 'adasum', name: 'g' })),
      );
      for (const [first, second] of grouped) {
        assertClose(first as Float32Array, reference(a, [9]), 1e-5, 'grouped first');
        assertClose(second as Float32Array, reference(b, [4]), 1e-5, 'grouped second');
      }
      // The group ran as one fused run: the per-tensor coefficients came from the packed buffer.
      assert.deepEqual({ ...memoryEngineOf(ranks[0] as RingReduce).executionCounts }, { executions: 2, fused: 1 });
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  });

  it("fp16 compression: the halves combined, near the tree's float64 result", async () => {
    const ranks = startMemoryWorld(4);
    try {
      const random = seeded(5);
      const inputs = ranks.map(() => randomArray('float32', 11, random) as Float32Array);
      const out = await Promise.all(
        ranks.map((rr, r) => rr.allreduce(inputs[r] as Float32Array, { op: 'adasum', compression: 'fp16' })),
      );
      for (const o of out) assertClose(o as Float32Array, reference(inputs, [11]), 1e-2, 'fp16');
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  });

  it('a rank that has joined stands in with zeros: the others are combined without it', async () => {
    const ranks = startMemoryWorld(2);
    try {
      const zero = ranks[0] as RingReduce;
      const one = ranks[1] as RingReduce;
      const joined = one.join();
      const mine = Float64Array.from([1, -2, 3]);
      assert.deepEqual([...(await zero.allreduce(mine, { op: 'adasum' }))], [1, -2, 3]);
      await Promise.all([zero.join(), joined]);
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  });

  it('runs in a process set of a power-of-two size inside a job of another', async () => {
    const ranks = startMemoryWorld(3);
    try {
      const sets = await Promise.all(ranks.map((rr) => rr.addProcessSet([0, 2])));
      const inputs = [Float64Array.from([1, 2]), Float64Array.from([3, -4])];
      const out = await Promise.all(
        [0, 2].map((r, i) => ranks[r]?.allreduce(inputs[i] as Float64Array, { op: 'adasum', processSet: sets[r] })),
      );
      for (const o of out) assertClose(o as Float64Array, reference(inputs, [2]), 1e-15, 'set');
      await assert.rejects(
        Promise.resolve().then(() => ranks[0]?.allreduce(new Float32Array(2), { op: 'adasum' })),
        {
          name: 'InvalidArgumentError',
          message:
            "option 'op' is 'adasum' but the job (or process set) has 3 ranks: adasum runs on 1, 2, 4, 8, ... ranks (a power of two)",
        },
      );
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  });

  it('refuses integer tensors, and reduce and reducescatter refuse it', async () => {
    const [rr] = startMemoryWorld(1);
    try {
      assert.throws(() => rr?.allreduceSync(new Int32Array(2), { op: 'adasum' }), /adasum needs float32 or float64/);
      await assert.rejects(async () => rr?.reduce(new Float32Array(2), { op: 'adasum' as never }), /allreduce's only/);
      await assert.rejects(async () => rr?.reducescatter(new Float32Array(2), { op: 'adasum' as never }), /allreduce's only/);
      const one = await rr?.allreduce(Float32Array.from([2, 3]), { op: 'adasum' });
      assert.deepEqual([...(one as Float32Array)], [2, 3]);
    } finally {
      await rr?.shutdown();
    }
  });

  it("one rank's adasum against another's sum: every rank gets the same MismatchError", async () => {
    const ranks = startMemoryWorld(2);
    try {
      const results = await Promise.allSettled(
        ranks.map((rr, r) => rr.allreduce(new Float32Array(3), { name: 'grad', op: r === 0 ? 'adasum' : 'sum' })),
      );
      const messages = results.map((r) => {
        assert.equal(r.status, 'rejected');
        const reason = (r as PromiseRejectedResult).reason as Error;
        assert.equal(reason.name, 'MismatchError');
        return reason.message;
      });
      assert.equal(messages[0], "Mismatched reduce ops for tensor 'grad': rank 0 has adasum, rank 1 has sum.");
      assert.equal(messages[1], messages[0]);
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  });
});
