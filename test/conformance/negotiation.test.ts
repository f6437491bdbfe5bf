/**
 * Negotiation across real ranks: different submission orders, mismatches that fail every rank
 * with the same MismatchError while the job goes on, names in flight, stalls.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import { InvalidArgumentError, MismatchError, TimeoutError } from '../../src/core/errors.js';
import { shuffled } from '../helpers/shuffle.js';
import { startWorld, stopWorld } from '../helpers/world.js';

async function expectSameRejection(promises: Promise<unknown>[], kind: new (...args: never[]) => Error, pattern: RegExp) {
  const settled = await Promise.allSettled(promises);
  const messages = settled.map((s, rank) => {
    assert.equal(s.status, 'rejected', `rank ${rank} should have failed`);
    const reason = (s as PromiseRejectedResult).reason as Error;
    assert.ok(reason instanceof kind, `rank ${rank}: ${reason.name}: ${reason.message}`);
    assert.match(reason.message, pattern);
    return reason.message;
  });
  assert.equal(new Set(messages).size, 1, `every rank gets the same message: ${messages.join(' | ')}`);
}

describe('negotiation on 4 ranks', () => {
  let world: RingReduce[] = [];
  before(async () => {
    world = await startWorld(4, { stallTimeoutMs: 1500 });
  });
  after(async () => {
    await stopWorld(world);
  });

  test('50 named tensors submitted in different random orders all complete correctly', async () => {
    const names = Array.from({ length: 50 }, (_, i) => `layer${i}/grad`);
    const results = await Promise.all(
      world.map((rr, rank) =>
        Promise.all(
          shuffled(names, rank + 1).map(async (name) => {
            const i = Number(name.slice(5, name.indexOf('/')));
            const out = await rr.allreduce(new Float32Array(100 + i).fill(rank + i), { name });
            return [name, out] as const;
          }),
        ),
      ),
    );
    for (const perRank of results) {
      for (const [name, out] of perRank) {
        const i = Number(name.slice(5, name.indexOf('/')));
        assert.equal(out.length, 100 + i);
        assert.ok(
          out.every((v) => v === 0 + 1 + 2 + 3 + 4 * i),
          `${name}: ${out[0]}`,
        );
      }
    }
  });

  test('loops of named collectives, each rank at its own pace: every step gets its own result', async () => {
    // A rank may close a ready round and submit its next step while another still waits for a
    // third rank's report: nothing of step s + 1 may leak into step s (eager scalars, recursive
    // doubling, the ring, broadcast).
    const steps = 60;
    const lengths = { scalar: 1, small: 256, ring: 16384 };
    await Promise.all(
      world.map(async (rr, rank) => {
        for (let step = 0; step < steps; step++) {
          const calls = Object.entries(lengths).map(async ([kind, length]) => {
            const out = await rr.allreduce(new Float32Array(length).fill(rank + step), { name: `loop/${kind}` });
            const want = 6 + 4 * step;
            assert.ok(out[0] === want && out[length - 1] === want, `step ${step} ${kind} on rank ${rank}: ${out[0]}`);
          });
          const bc = rr.broadcast(new Float32Array(64).fill(rank * 1000 + step), { name: 'loop/bc', root: 1 }).then((out) => {
            assert.equal(out[63], 1000 + step, `step ${step} broadcast on rank ${rank}`);
          });
          await Promise.all([...calls, bc]);
        }
      }),
    );
  });

  test("mismatched dtype, shape, allgather dimension, allgather 'out' length and root reject on every rank; the next call works", async () => {
    const dtype = world.map((rr, rank) => rr.allreduce(rank === 2 ? new Int32Array(4) : new Float32Array(4), { name: 'dt' }));
    await expectSameRejection(dtype, MismatchError, /data types for tensor 'dt': rank 0 has float32, rank 2 has int32/);

    const shape = world.map((rr, rank) =>
      rr.allreduce({ data: new Float32Array(6), shape: rank === 1 ? [3, 2] : [2, 3] }, { name: 'sh' }),
    );
    await expectSameRejection(shape, MismatchError, /shapes for tensor 'sh'/);

    const gather = world.map((rr, rank) =>
      rr.allgather({ data: new Float32Array(rank === 3 ? 5 : 4), shape: [1, rank === 3 ? 5 : 4] }, { name: 'ag' }),
    );
    await expectSameRejection(gather, MismatchError, /allgather dimensions after the first for tensor 'ag'/);

    // Rows 1, 2, 3, 4 of 2 elements: 20 elements gathered; rank 2's out has room for 18.
    const outs = world.map((_, rank) => new Float32Array(new SharedArrayBuffer(4 * (rank === 2 ? 18 : 20))));
    const into = world.map((rr, rank) =>
      rr.allgather({ data: new Float32Array(2 * (rank + 1)), shape: [rank + 1, 2] }, { name: 'ag-out', out: outs[rank] }),
    );
    await expectSameRejection(
      into,
      InvalidArgumentError,
      /Wrong 'out' for allgather of tensor 'ag-out': rank 2's has 18 elements, the result has 20 \(first dimensions \[1, 2, 3, 4\] × 2 elements per row\)/,
    );

    const root = world.map((rr, rank) => rr.broadcast(new Float32Array(3), { name: 'bc', root: rank === 1 ? 1 : 0 }));
    await expectSameRejection(root, MismatchError, /broadcast roots for tensor 'bc'/);

    const ok = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1, 2]), { name: 'after' })));
    for (const out of ok) assert.deepEqual([...out], [4, 8]);
  });

  test('a name already in flight on a rank is refused there', async () => {
    const first = world[0]?.allreduce(new Float32Array(1), { name: 'dup' });
    await assert.rejects(async () => world[0]?.allreduce(new Float32Array(1), { name: 'dup' }), InvalidArgumentError);
    const rest = world.slice(1).map((rr) => rr.allreduce(new Float32Array(1), { name: 'dup' }));
    await Promise.all([first, ...rest]);
  });

  test('a tensor some ranks never submit fails on the others with the missing ranks named', async () => {
    const partial = world.slice(0, 2).map((rr) => rr.allreduce(new Float32Array(1), { name: 'lonely' }));
    await expectSameRejection(partial, TimeoutError, /'lonely' timed out .* ranks 2, 3 did not submit it \(ranks 0, 1 did\)/);
    const ok = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1]), { name: 'still-alive' })));
    assert.deepEqual(
      ok.map((o) => o[0]),
      [4, 4, 4, 4],
    );
  });

  test('bad arguments reject with InvalidArgumentError naming the argument, nothing sent', async () => {
    const rr = world[0] as RingReduce;
    await assert.rejects(rr.allreduce([1, 2] as never), /tensor must be a typed array/);
    await assert.rejects(rr.allreduce(new Int32Array(1), { op: 'average' }), /use op 'sum'/);
    await assert.rejects(rr.broadcast(new Int32Array(1), { root: 9 }), /option 'root' must be an integer rank in \[0, 3\]/);
  });
});

describe('negotiation of cached tensors (ready rounds, without rank 0) on 4 ranks', () => {
  let world: RingReduce[] = [];
  before(async () => {
    world = await startWorld(4, { stallTimeoutMs: 1500 });
  });
  after(async () => {
    await stopWorld(world);
  });

  /** One training step: every rank submits `names` in its own order; returns each rank's outputs by name. */
  function step(names: readonly string[], seed: number, value: (rank: number, i: number) => number) {
    return Promise.all(
      world.map((rr, rank) =>
        Promise.all(
          shuffled(names, seed * 31 + rank).map(async (name) => {
            const i = names.indexOf(name);
            if (i % 3 === 2)
              return [name, await rr.broadcast(new Int32Array(8 + i).fill(value(rank, i)), { name, root: i % 4 })] as const;
            const op = i % 3 === 1 ? 'max' : 'sum';
            return [name, await rr.allreduce(new Float64Array(8 + i).fill(value(rank, i)), { name, op })] as const;
          }),
        ),
      ),
    );
  }

  test('a training loop: 8 steps of 30 tensors in different orders per rank and step, all correct', async () => {
    const names = Array.from({ length: 30 }, (_, i) => `net/layer${i}`);
    for (let s = 0; s < 8; s++) {
      const value = (rank: number, i: number) => rank * 10 + i + s;
      const results = await step(names, s, value);
      for (const perRank of results) {
        for (const [name, out] of perRank) {
          const i = names.indexOf(name);
          const expected =
            i % 3 === 2 ? value(i % 4, i) : i % 3 === 1 ? value(3, i) : [0, 1, 2, 3].reduce((a, r) => a + value(r, i), 0);
          assert.equal(out.length, 8 + i);
          assert.ok(
            out.every((v) => v === expected),
            `step ${s} ${name}: ${out[0]} != ${expected}`,
          );
        }
      }
    }
  });

  test('a cached tensor submitted with another shape on one rank fails on every rank alike; the job goes on', async () => {
    const run = (shapeOf: (rank: number) => number[]) =>
      world.map((rr, rank) => rr.allreduce({ data: new Float32Array(6).fill(1), shape: shapeOf(rank) }, { name: 'cached/sh' }));
    for (let i = 0; i < 2; i++) for (const out of await Promise.all(run(() => [2, 3]))) assert.equal(out.data[0], 4);
    await expectSameRejection(
      run((rank) => (rank === 1 ? [3, 2] : [2, 3])),
      MismatchError,
      /shapes for tensor 'cached\/sh'/,
    );
    for (let i = 0; i < 2; i++) for (const out of await Promise.all(run(() => [2, 3]))) assert.equal(out.data[0], 4);
    // Every rank changes the shape at once: no error, the new shape is learned.
    for (let i = 0; i < 2; i++) for (const out of await Promise.all(run(() => [6]))) assert.equal(out.data[5], 4);
  });

  test('a cached tensor some ranks stop submitting fails on the others with the missing ranks named', async () => {
    const all = () => Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1]), { name: 'cached/lonely' })));
    await all();
    await all();
    const partial = world.slice(1, 3).map((rr) => rr.allreduce(new Float32Array(1), { name: 'cached/lonely' }));
    await expectSameRejection(
      partial,
      TimeoutError,
      /'cached\/lonely' timed out .* ranks 0, 3 did not submit it \(ranks 1, 2 did\)/,
    );
    const ok = await all();
    assert.deepEqual(
      ok.map((o) => o[0]),
      [4, 4, 4, 4],
    );
  });

  test('cached, new and unnamed tensors in one burst, in different orders, all complete correctly', async () => {
    const cached = Array.from({ length: 10 }, (_, i) => `mix/cached${i}`);
    await Promise.all(world.map((rr) => Promise.all(cached.map((name) => rr.allreduce(new Float32Array(4), { name })))));
    for (let s = 0; s < 3; s++) {
      const names = [...cached, `mix/new${s}a`, `mix/new${s}b`];
      const results = await Promise.all(
        world.map(async (rr, rank) => {
          const named = shuffled(names, s * 7 + rank).map((name) => rr.allreduce(new Float32Array(4).fill(rank + 1), { name }));
          const unnamed = rr.allreduce(new Float32Array(2).fill(rank));
          return [...(await Promise.all(named)), await unnamed];
        }),
      );
      for (const perRank of results) {
        assert.deepEqual([...(perRank.at(-1) as Float32Array)], [6, 6]);
        for (const out of perRank.slice(0, -1)) assert.equal(out[0], 10);
      }
    }
  });
});
