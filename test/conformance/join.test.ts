/**
 * join with real ranks (4), over the memory world and TCP worker threads: ranks that run out of
 * data at different steps and take part in the others' collectives as neutral contributors (every
 * reduce op of float32 and int32, allgather, barrier), join in an epoch loop, join in a process set,
 * rooted collectives from a joined root, reducescatter with a joined rank.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { ProcessSet, RingReduce } from '../../src/api/runtime.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import type { ReduceOp } from '../../src/core/types.js';
import { addSet, bounded, expectSameRejection, kWorldFactories, removeSet, sleep, withDeadline } from '../helpers/real_worlds.js';
import { shuffled } from '../helpers/shuffle.js';
import { stopWorld } from '../helpers/world.js';

const kSize = 4;
type Dtype = 'float32' | 'int32';
type Array32 = Float32Array | Int32Array;

/** Every reduce op valid for each dtype. */
const kOps: Record<Dtype, readonly ReduceOp[]> = {
  float32: ['sum', 'average', 'min', 'max', 'product'],
  int32: ['sum', 'min', 'max', 'product', 'band', 'bor', 'bxor'],
};

interface TensorSpec {
  name: string;
  dtype: Dtype;
  op: ReduceOp;
  length: number;
}

/** One allreduce per (dtype, op); lengths alternate between an eager-sized tensor and a ring-sized one. */
const kTensors: readonly TensorSpec[] = (['float32', 'int32'] as const).flatMap((dtype) =>
  kOps[dtype].map((op, i) => ({ name: `${dtype}/${op}`, dtype, op, length: i % 2 === 0 ? 3 : 600 })),
);

/** Rank `rank`'s input at `step`: exact in float32 (halves, eighths), products that stay small. */
function inputOf(t: TensorSpec, rank: number, step: number): Array32 {
  const k = (i: number) => (rank * 5 + step * 3 + i * 7) % 13;
  if (t.dtype === 'float32') {
    return Float32Array.from({ length: t.length }, (_, i) => (t.op === 'product' ? 1 + (k(i) - 6) / 8 : (k(i) - 6) * 0.5 + rank));
  }
  if (t.op === 'band' || t.op === 'bor' || t.op === 'bxor') {
    return Int32Array.from({ length: t.length }, (_, i) => ((rank * 0x9e37 + step * 0x79b9 + i * 0x2545) ^ (i << 20)) | 0);
  }
  return Int32Array.from({ length: t.length }, (_, i) => k(i) - 6 + rank);
}

function combine(op: ReduceOp, dtype: Dtype, a: number, b: number): number {
  switch (op) {
    case 'sum':
    case 'average':
      return a + b;
    case 'min':
      return Math.min(a, b);
    case 'max':
      return Math.max(a, b);
    case 'product':
      return dtype === 'int32' ? Math.imul(a, b) : a * b;
    case 'band':
      return a & b;
    case 'bor':
      return a | b;
    case 'bxor':
      return a ^ b;
  }
}

/** The reduction of `inputs` (the contributing ranks'), in double precision, rounded to the dtype at the end. */
function reference(t: TensorSpec, inputs: readonly Array32[]): number[] {
  return Array.from({ length: t.length }, (_, i) => {
    let acc = inputs[0]?.[i] as number;
    for (const input of inputs.slice(1)) acc = combine(t.op, t.dtype, acc, input[i] as number);
    if (t.op === 'average') acc /= inputs.length;
    return t.dtype === 'float32' ? Math.fround(acc) : acc | 0;
  });
}

function assertClose(actual: ArrayLike<number>, expected: readonly number[], what: string, relative = 0): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i] as number;
    const e = expected[i] as number;
    const ok = relative === 0 ? Object.is(a, e) || a === e : Math.abs(a - e) <= relative * Math.max(1, Math.abs(e));
    assert.ok(ok, `${what}[${i}]: got ${a}, expected ${e}`);
  }
}

/** Rows [start, count) of the even split of `rows` over `size` ranks (reducescatter's). */
function rowsOf(rows: number, size: number, rank: number): [number, number] {
  const base = Math.floor(rows / size);
  const extra = rows % size;
  return [rank * base + Math.min(rank, extra), base + (rank < extra ? 1 : 0)];
}

const gatherRows = (rank: number, step: number) =>
  Float32Array.from({ length: (rank + 1) * 2 }, (_, j) => rank * 1000 + step * 10 + j);

/**
 * One step of rank `rr`: every tensor of kTensors, an allgather and a barrier, submitted in a
 * random order of its own; checks every result against the ranks in `contributors`.
 */
async function step(rr: RingReduce, s: number, contributors: readonly number[]): Promise<void> {
  const rank = rr.rank();
  const names = shuffled([...kTensors.map((t) => t.name), 'gather', 'barrier', 'grouped'], 1 + rank * 7 + s * 131);
  const where = `rank ${rank}, step ${s}, contributors [${contributors.join(', ')}]`;
  await Promise.all(
    names.map(async (name) => {
      if (name === 'barrier') return rr.barrier({ name });
      if (name === 'grouped') {
        // A named group: cached after its first step, so later steps meet joined ranks through the cache.
        const [a, b] = await rr.groupedAllreduce([new Float32Array(3).fill(rank + s), new Int32Array(2).fill(rank + 1)], {
          name,
        });
        const sumOf = (f: (r: number) => number) => contributors.reduce((acc, r) => acc + f(r), 0);
        assertClose(a as Float32Array, new Array(3).fill(sumOf((r) => r + s)), `grouped member 0, ${where}`);
        assertClose(b as Int32Array, new Array(2).fill(sumOf((r) => r + 1)), `grouped member 1, ${where}`);
        return;
      }
      if (name === 'gather') {
        const out = await rr.allgather({ data: gatherRows(rank, s), shape: [rank + 1, 2] }, { name });
        const rows = contributors.reduce((a, r) => a + r + 1, 0);
        assert.deepEqual(out.shape, [rows, 2], `allgather shape, ${where}`);
        assertClose(
          out.data,
          contributors.flatMap((r) => [...gatherRows(r, s)]),
          `allgather, ${where}`,
        );
        return;
      }
      const t = kTensors.find((x) => x.name === name) as TensorSpec;
      const out = await rr.allreduce(inputOf(t, rank, s), { name, op: t.op });
      const want = reference(
        t,
        contributors.map((r) => inputOf(t, r, s)),
      );
      assertClose(out, want, `allreduce '${name}', ${where}`, t.op === 'average' ? 1e-6 : 0);
    }),
  );
}

/** The ranks that run step `s` when rank r runs steps[r] steps. */
const contributorsOf = (steps: readonly number[], s: number) => steps.flatMap((n, r) => (n > s ? [r] : []));

/** A test that hangs fails after this instead (a join gone wrong can leave calls pending forever). */
const kTestMs = 20_000;

for (const factory of kWorldFactories) {
  describe(`join, ${factory.name}, ${kSize} ranks`, () => {
    // A world per test: a join that goes wrong leaves no state behind for the next test.
    let world: RingReduce[] = [];
    beforeEach(async () => {
      world = await factory.start(kSize, { stallTimeoutMs: 2000, ioTimeoutMs: 3000 });
    });
    afterEach(async () => {
      await withDeadline(stopWorld(world), 10_000, 'shutdown').catch(() => {});
    });

    test(
      'rank r runs r + 1 steps of every op, allgather and barrier; results over the ranks that took part',
      bounded(kTestMs, async () => {
        const steps = world.map((_, r) => r + 1);
        const lasts = await Promise.all(
          world.map(async (rr, rank) => {
            for (let s = 0; s < (steps[rank] as number); s++) await step(rr, s, contributorsOf(steps, s));
            // Rank 3 would be last anyway (its last step waits for every other join): make it certain.
            if (rank === 3) await sleep(100);
            return rr.join();
          }),
        );
        assert.deepEqual(lasts, [3, 3, 3, 3]);
        // Back to normal: every rank contributes again, through the caches and ready rounds.
        await Promise.all(world.map(async (rr) => step(rr, 10, [0, 1, 2, 3])));
        await Promise.all(world.map(async (rr) => step(rr, 11, [0, 1, 2, 3])));
      }),
    );

    test(
      'join twice in a row (epoch loop): each epoch ends with the rank that joined last',
      bounded(kTestMs, async () => {
        // Steps per rank in each epoch, and the rank delayed before its join (the last to join).
        const epochs = [
          { steps: [1, 2, 3, 4], last: 3 },
          { steps: [4, 3, 2, 1], last: 0 },
          { steps: [2, 2, 2, 2], last: 1 },
        ];
        const tensors = [
          { name: 'epoch/sum', dtype: 'float32', op: 'sum', length: 8 },
          { name: 'epoch/average', dtype: 'float32', op: 'average', length: 2 },
          { name: 'epoch/max', dtype: 'int32', op: 'max', length: 1000 },
        ] as const satisfies readonly TensorSpec[];
        for (const [e, epoch] of epochs.entries()) {
          const lasts = await Promise.all(
            world.map(async (rr, rank) => {
              for (let s = 0; s < (epoch.steps[rank] as number); s++) {
                const contributors = contributorsOf(epoch.steps, s);
                await Promise.all(
                  tensors.map(async (t) => {
                    const out = await rr.allreduce(inputOf(t, rank, 100 * e + s), { name: t.name, op: t.op });
                    const want = reference(
                      t,
                      contributors.map((r) => inputOf(t, r, 100 * e + s)),
                    );
                    assertClose(out, want, `'${t.name}', epoch ${e}, step ${s}, rank ${rank}`, t.op === 'average' ? 1e-6 : 0);
                  }),
                );
              }
              if (rank === epoch.last) await sleep(300);
              return rr.join();
            }),
          );
          assert.deepEqual(lasts, [epoch.last, epoch.last, epoch.last, epoch.last], `epoch ${e}`);
        }
        const sums = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1, 2]), { name: 'epoch/sum/after' })));
        for (const out of sums) assert.deepEqual([...out], [4, 8]);
      }),
    );

    test(
      'a cached tensor submitted as another rank joins: the collectives after the join agree on every rank',
      bounded(kTestMs, async () => {
        // 'c' (eager-sized) and 'ring' are cached after these steps; then rank 3 joins while the
        // others submit both again at the same moment, before they can know of the join.
        const tensors = [
          { name: 'c', dtype: 'float32', op: 'sum', length: 4 },
          { name: 'ring', dtype: 'float32', op: 'sum', length: 1000 },
        ] as const satisfies readonly TensorSpec[];
        const stepOf = (rr: RingReduce, s: number, contributors: readonly number[]) =>
          Promise.all(
            tensors.map(async (t) => {
              const out = await rr.allreduce(inputOf(t, rr.rank(), s), { name: t.name });
              const want = reference(
                t,
                contributors.map((r) => inputOf(t, r, s)),
              );
              assertClose(out, want, `'${t.name}', step ${s}, rank ${rr.rank()}, contributors [${contributors.join(', ')}]`);
            }),
          );
        for (let s = 0; s < 2; s++) await Promise.all(world.map((rr) => stepOf(rr, s, [0, 1, 2, 3])));
        const lasts = await Promise.all(
          world.map(async (rr, rank) => {
            if (rank === 3) return rr.join();
            await stepOf(rr, 2, [0, 1, 2]);
            if (rank === 1) await sleep(200);
            return rr.join();
          }),
        );
        assert.deepEqual(lasts, [1, 1, 1, 1]);
        for (let s = 3; s < 6; s++) await Promise.all(world.map((rr) => stepOf(rr, s, [0, 1, 2, 3])));
      }),
    );

    test(
      'join in a process set: the set goes on with its other members, the world with everyone',
      bounded(kTestMs, async () => {
        const sets = await addSet(world, [1, 2, 3]);
        const setOf = (rank: number) => sets[rank] as ProcessSet;
        await assert.rejects((world[0] as RingReduce).join({ processSet: setOf(0) }), InvalidArgumentError);
        const t = kTensors.find((x) => x.name === 'float32/average') as TensorSpec;
        const lasts = await Promise.all(
          world.map(async (rr, rank) => {
            const world4 = () => rr.allreduce(new Int32Array([rank, 1]), { name: 'w' });
            if (rank === 0) {
              const out = await world4();
              assert.deepEqual([...out], [6, 4]);
              return undefined;
            }
            const set = setOf(rank);
            if (rank === 1) {
              const joined = rr.join({ processSet: set });
              // Joined in the set: no other call there, but the world's collectives go on.
              await assert.rejects(
                rr.allreduce(new Float32Array(1), { processSet: set, name: 'x' }),
                (e) => e instanceof InvalidArgumentError && /rank 1 has joined process set \d+/.test(e.message),
              );
              const out = await world4();
              assert.deepEqual([...out], [6, 4]);
              return joined;
            }
            const out = await world4();
            assert.deepEqual([...out], [6, 4]);
            for (let s = 0; s < 2; s++) {
              const [avg, gathered] = await Promise.all([
                rr.allreduce(inputOf(t, rank, s), { processSet: set, name: 'avg', op: 'average' }),
                rr.allgather(new Int32Array([rank, s]), { processSet: set, name: 'g' }),
                rr.barrier({ processSet: set, name: 'b' }),
              ]);
              assertClose(avg, reference(t, [inputOf(t, 2, s), inputOf(t, 3, s)]), `set average, rank ${rank}`, 1e-6);
              assert.deepEqual([...gathered], [2, s, 3, s], `set allgather, rank ${rank}`);
            }
            if (rank === 3) await sleep(200);
            return rr.join({ processSet: set });
          }),
        );
        // Ranks inside the set: job rank 3, the last to join, is the set's rank 2.
        assert.deepEqual(lasts, [undefined, 2, 2, 2]);
        // The set is back to normal.
        const outs = await Promise.all(
          [1, 2, 3].map((r) => world[r]?.allreduce(new Float32Array([r]), { processSet: setOf(r), name: 'after' })),
        );
        for (const out of outs) assert.deepEqual([...(out ?? [])], [6]);
        await removeSet(world, sets);
      }),
    );

    test(
      'a joined root: broadcast, reduce and gather from it fail with the same message on every other rank; alltoall and scatter fail',
      bounded(kTestMs, async () => {
        const rest = world.slice(1);
        const joined = (world[0] as RingReduce).join();
        await expectSameRejection(
          rest.map((rr) => rr.broadcast(new Float32Array([rr.rank()]), { name: 'bc', root: 0 })),
          InvalidArgumentError,
          /broadcast of tensor 'bc' has root 0, which has joined/,
          'broadcast',
        );
        await expectSameRejection(
          rest.map((rr) => rr.reduce(new Float32Array([rr.rank()]), { name: 'rd', root: 0 })),
          InvalidArgumentError,
          /reduce of tensor 'rd' has root 0, which has joined/,
          'reduce',
        );
        await expectSameRejection(
          rest.map((rr) => rr.gather(new Float32Array([rr.rank()]), { name: 'ga', root: 0 })),
          InvalidArgumentError,
          /gather of tensor 'ga' has root 0, which has joined/,
          'gather',
        );
        await expectSameRejection(
          rest.map((rr) => rr.alltoall({ data: new Float32Array(4), shape: [4] }, { name: 'a2a' })),
          InvalidArgumentError,
          /alltoall of tensor 'a2a' cannot run while ranks 0 have joined/,
          'alltoall',
        );
        await expectSameRejection(
          rest.map((rr) => rr.scatter(rr.rank() === 1 ? new Float32Array(4) : null, { name: 'sc', root: 1 })),
          InvalidArgumentError,
          /scatter of tensor 'sc' cannot run while ranks 0 have joined/,
          'scatter',
        );
        // From roots that have not joined they work (the joined rank receives and drops, or gives no rows).
        const [bcs, reduced, gathered] = await Promise.all([
          Promise.all(rest.map((rr) => rr.broadcast(new Float32Array([rr.rank() * 10]), { name: 'bc-ok', root: 2 }))),
          Promise.all(rest.map((rr) => rr.reduce(new Float32Array([rr.rank()]), { name: 'rd-ok', root: 3 }))),
          Promise.all(rest.map((rr) => rr.gather(new Float32Array([rr.rank(), -rr.rank()]), { name: 'ga-ok', root: 1 }))),
        ]);
        for (const out of bcs) assert.deepEqual([...out], [20]);
        assert.deepEqual(
          reduced.map((r) => (r ? [...r] : null)),
          [null, null, [6]],
        );
        assert.deepEqual(
          gathered.map((g) => (g ? [...g] : null)),
          [[1, -1, 2, -2, 3, -3], null, null],
        );
        const lasts = await Promise.all([
          joined,
          ...rest.map(async (rr) => {
            if (rr.rank() === 2) await sleep(200);
            return rr.join();
          }),
        ]);
        assert.deepEqual(lasts, [2, 2, 2, 2]);
      }),
    );

    test(
      'reducescatter with a joined rank: identity for its share, average over the 3 contributors',
      bounded(kTestMs, async () => {
        const cases = [
          { name: 'rs/sum', dtype: 'float32', op: 'sum', length: 18 },
          { name: 'rs/average', dtype: 'float32', op: 'average', length: 18 },
          { name: 'rs/max', dtype: 'float32', op: 'max', length: 18 },
          { name: 'rs/min', dtype: 'int32', op: 'min', length: 18 },
          { name: 'rs/band', dtype: 'int32', op: 'band', length: 18 },
          { name: 'rs/product', dtype: 'int32', op: 'product', length: 18 },
        ] as const satisfies readonly TensorSpec[];
        const contributors = [0, 1, 3];
        const lasts = await Promise.all(
          world.map(async (rr, rank) => {
            if (rank === 2) return rr.join();
            for (let s = 0; s < 2; s++) {
              await Promise.all(
                cases.map(async (t) => {
                  const out = await rr.reducescatter({ data: inputOf(t, rank, s), shape: [6, 3] }, { name: t.name, op: t.op });
                  const [start, count] = rowsOf(6, kSize, rank);
                  const full = reference(
                    t,
                    contributors.map((r) => inputOf(t, r, s)),
                  );
                  assert.deepEqual(out.shape, [count, 3]);
                  assertClose(
                    out.data,
                    full.slice(start * 3, (start + count) * 3),
                    `'${t.name}', step ${s}, rank ${rank}`,
                    t.op === 'average' ? 1e-6 : 0,
                  );
                }),
              );
            }
            if (rank === 1) await sleep(200);
            return rr.join();
          }),
        );
        assert.deepEqual(lasts, [1, 1, 1, 1]);
      }),
    );
  });
}

for (const factory of kWorldFactories) {
  test(`join, ${factory.name}: a rank that waits in join longer than the stall timeout is not a stall`, async () => {
    const world = await factory.start(3, { stallTimeoutMs: 300 });
    try {
      const first = world[0]?.join() as Promise<number>;
      // The others keep training for twice the stall timeout, then join.
      for (let step = 0; step < 6; step++) {
        await Promise.all(world.slice(1).map((rr, i) => rr.allreduce(new Float32Array([i]), { name: 'late' })));
        await sleep(100);
      }
      await sleep(200);
      const lasts = await withDeadline(Promise.all([first, world[1]?.join(), world[2]?.join()]), 5000, 'join');
      assert.ok(
        lasts.every((last) => last === lasts[0] && last !== 0),
        `join resolved to ${lasts.join(', ')}`,
      );
    } finally {
      await stopWorld(world);
    }
  });
}
