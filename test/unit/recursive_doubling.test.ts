/**
 * The latency path: recursive doubling gives the reference result on every rank, with the same
 * bits on every rank, for power-of-two and other world sizes, every dtype and op.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allreduce } from '../../src/algorithms/allreduce.js';
import { recursiveDoublingAllreduce } from '../../src/algorithms/recursive_doubling.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { kDTypes } from '../../src/core/dtypes.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import { firstMismatch, opsFor, randomArray, referenceReduce, sameBytes, seeded, toleranceFor } from './support/typed_data.js';

describe('recursiveDoublingAllreduce', () => {
  for (const size of [2, 3, 4, 5, 6, 7, 8]) {
    it(`${size} ranks: every dtype and op, identical bits on every rank`, async () => {
      const random = seeded(size * 101);
      for (const dtype of kDTypes) {
        for (const op of opsFor(dtype)) {
          const world = createMemoryWorld(size, { delivery: 'microtask', ioTimeoutMs: 5000 });
          const inputs = world.map(() => randomArray(dtype, 37, random, op === 'product'));
          const bufs = inputs.map((a) => a.slice());
          const pool = new BufferPool();
          await Promise.all(world.map((t, rank) => recursiveDoublingAllreduce(t, bufs[rank] as never, op, 7, { pool })));
          const expected = referenceReduce(dtype, op, inputs);
          const mismatch = firstMismatch(bufs[0] as never, expected, toleranceFor(dtype, op, size));
          assert.equal(mismatch, undefined, `${dtype} ${op}`);
          for (const b of bufs) assert.ok(sameBytes(b as never, bufs[0] as never), `${dtype} ${op}: ranks agree`);
          await world.closeAll();
        }
      }
    });
  }

  it('allreduce picks it at or below latencyMaxBytes, and the ring above (same results)', async () => {
    for (const length of [16, 4096]) {
      const world = createMemoryWorld(3, { delivery: 'microtask', ioTimeoutMs: 5000 });
      const bufs = world.map((_, r) => new Float32Array(length).fill(r + 1));
      await Promise.all(world.map((t, rank) => allreduce(t, bufs[rank] as Float32Array, 'sum', 1, { latencyMaxBytes: 1024 })));
      for (const b of bufs) assert.ok(b.every((v) => v === 6));
      await world.closeAll();
    }
  });
});
