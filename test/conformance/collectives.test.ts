/**
 * The conformance suite: N ranks (engine worker threads) in this process, over real loopback
 * TCP, for N = 1..5; every dtype, reduce op and the element counts the issue names, against
 * results computed serially.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import { allocShared, isFloat, kDTypes } from '../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../src/core/types.js';
import { compareArrays, expectedAllreduce, makeInput } from '../helpers/reference.js';
import { startWorld, stopWorld } from '../helpers/world.js';

const kOps: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product'];
const combos = kDTypes.flatMap((dtype) => kOps.filter((op) => op !== 'average' || isFloat(dtype)).map((op) => ({ dtype, op })));

async function checkAllreduce(world: readonly RingReduce[], dtype: DType, op: ReduceOp, count: number): Promise<void> {
  const inputs = world.map((_, rank) => makeInput(dtype, rank, count, op));
  const copies = inputs.map((input) => input.slice());
  const name = `ar/${dtype}/${op}/${count}`;
  const results = await Promise.all(world.map((rr, rank) => rr.allreduce(inputs[rank] as TypedArray, { name, op })));
  const expected = expectedAllreduce(dtype, op, inputs);
  results.forEach((result, rank) => {
    const diff = compareArrays(dtype, result, expected);
    assert.equal(diff, undefined, `${name} on rank ${rank} of ${world.length}: ${diff}`);
    assert.deepEqual(inputs[rank], copies[rank], `${name}: the input of rank ${rank} was modified`);
  });
}

for (const size of [1, 2, 3, 4, 5]) {
  describe(`${size} rank${size > 1 ? 's' : ''}`, () => {
    let world: RingReduce[] = [];
    before(async () => {
      world = await startWorld(size);
    });
    after(async () => {
      await stopWorld(world);
    });

    test('allreduce: every dtype and op, counts 0, 1, N-1, N, N+1, 1000 (all in flight at once)', async () => {
      const counts = [...new Set([0, 1, Math.max(0, size - 1), size, size + 1, 1000])];
      await Promise.all(counts.flatMap((count) => combos.map(({ dtype, op }) => checkAllreduce(world, dtype, op, count))));
    });

    test('allreduce: every dtype and op, 2^20 elements', async () => {
      for (const { dtype, op } of combos) await checkAllreduce(world, dtype, op, 2 ** 20);
    });

    test("allgather: first dimensions differ per rank (some zero), every dtype; even ranks pass 'out'", async () => {
      await Promise.all(
        kDTypes.map(async (dtype) => {
          const rows = (rank: number) => (rank * 3) % 4; // 0, 3, 2, 1, 0, ...
          const totalRows = world.reduce((n, _, rank) => n + rows(rank), 0);
          const inputs = world.map((_, rank) => makeInput(dtype, rank, rows(rank) * 5, 'sum'));
          const outs = world.map((_, rank) => (rank % 2 === 0 ? allocShared(dtype, totalRows * 5) : undefined));
          const results = await Promise.all(
            world.map((rr, rank) => {
              const out = outs[rank];
              const tensor = { data: inputs[rank] as TypedArray, shape: [rows(rank), 5] };
              return rr.allgather(tensor, out ? { name: `ag/${dtype}`, out } : { name: `ag/${dtype}` });
            }),
          );
          results.forEach((result, rank) => {
            if (outs[rank]) assert.equal(result.data, outs[rank], `rank ${rank}: the result is its 'out'`);
          });
          const Ctor = (inputs[0] as TypedArray).constructor as new (n: number) => TypedArray;
          const expected = new Ctor(totalRows * 5);
          let offset = 0;
          for (const input of inputs) {
            expected.set(input as never, offset);
            offset += input.length;
          }
          for (const result of results) {
            assert.deepEqual(result.shape, [totalRows, 5]);
            assert.equal(compareArrays(dtype, result.data, expected), undefined);
          }
        }),
      );
    });

    test("in place: allreduce and broadcast with 'out' the tensor itself, every dtype, 2^18 elements", async () => {
      for (const dtype of kDTypes) {
        const inputs = world.map((_, rank) => makeInput(dtype, rank, 2 ** 18, 'sum'));
        const expected = expectedAllreduce(dtype, 'sum', inputs);
        const buffers = inputs.map((input) => {
          const shared = allocShared(dtype, input.length);
          shared.set(input as never);
          return shared;
        });
        const reduced = await Promise.all(
          world.map((rr, rank) => rr.allreduce(buffers[rank] as TypedArray, { name: `ip/ar/${dtype}`, out: buffers[rank] })),
        );
        reduced.forEach((result, rank) => {
          assert.equal(result, buffers[rank], `rank ${rank}: the result is the tensor itself`);
          assert.equal(compareArrays(dtype, result, expected), undefined, `in-place allreduce of ${dtype} on rank ${rank}`);
        });
        const root = size - 1;
        const rootValues = (buffers[root] as TypedArray).slice();
        const sent = await Promise.all(
          world.map((rr, rank) =>
            rr.broadcast(buffers[rank] as TypedArray, { root, name: `ip/bc/${dtype}`, out: buffers[rank] }),
          ),
        );
        sent.forEach((result, rank) => {
          assert.equal(result, buffers[rank]);
          assert.equal(compareArrays(dtype, result, rootValues), undefined, `in-place broadcast of ${dtype} on rank ${rank}`);
        });
      }
    });

    test('allgather: repeated calls of changing sizes each return their own values (the input copy is reused memory)', async () => {
      for (const [step, rowsPerRank] of [3, 1, 4, 2, 4].entries()) {
        const rows = (rank: number) => (rank + step) % (rowsPerRank + 1);
        const inputs = world.map((_, rank) =>
          Int32Array.from({ length: rows(rank) * 3 }, (_, i) => rank * 1000 + step * 100 + i),
        );
        const results = await Promise.all(
          world.map((rr, rank) =>
            rr.allgather({ data: inputs[rank] as Int32Array, shape: [rows(rank), 3] }, { name: 'ag/loop' }),
          ),
        );
        const expected = inputs.flatMap((input) => [...input]);
        for (const [rank, result] of results.entries())
          assert.deepEqual([...result.data], expected, `step ${step}, rank ${rank}`);
      }
    });

    test('broadcast: from every root, every dtype; non-root inputs untouched', async () => {
      for (let root = 0; root < size; root++) {
        await Promise.all(
          kDTypes.map(async (dtype) => {
            const inputs = world.map((_, rank) => makeInput(dtype, rank, 1001, 'sum'));
            const copies = inputs.map((input) => input.slice());
            const results = await Promise.all(
              world.map((rr, rank) => rr.broadcast(inputs[rank] as TypedArray, { root, name: `bc/${dtype}/${root}` })),
            );
            results.forEach((result, rank) => {
              assert.equal(compareArrays(dtype, result, copies[root] as TypedArray), undefined, `rank ${rank} root ${root}`);
              assert.deepEqual(inputs[rank], copies[rank]);
            });
          }),
        );
      }
    });

    test('results keep the kind of the input; unnamed calls match by order; barrier', async () => {
      const shaped = await Promise.all(world.map((rr) => rr.allreduce({ data: new Int16Array([1, 2, 3, 4]), shape: [2, 2] })));
      for (const r of shaped) {
        assert.deepEqual(r.shape, [2, 2]);
        assert.ok(r.data instanceof Int16Array);
        assert.deepEqual(
          [...r.data],
          [1, 2, 3, 4].map((v) => v * size),
        );
      }
      const first = world.map((rr) => rr.allreduce(new Float64Array([1])));
      const second = world.map((rr) => rr.allreduce(new Float64Array([10])));
      assert.deepEqual(
        (await Promise.all(first)).map((r) => r[0]),
        world.map(() => size),
      );
      assert.deepEqual(
        (await Promise.all(second)).map((r) => r[0]),
        world.map(() => 10 * size),
      );
      await Promise.all(world.map((rr) => rr.barrier()));
    });
  });
}
