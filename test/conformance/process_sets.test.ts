/**
 * Process sets with real ranks (4), over the memory world and TCP worker threads: disjoint and
 * overlapping sets running collectives with the same names at the same time, a slow set that does
 * not hold up another, static sets from init, removal with a collective pending, argument errors,
 * a mismatched addProcessSet, and a set's collective next to the world's of the same name.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ProcessSet, RingReduce } from '../../src/api/runtime.js';
import { InvalidArgumentError, MismatchError } from '../../src/core/errors.js';
import { startMemoryWorld } from '../helpers/local_engine.js';
import { addSet, bounded, expectSameRejection, kWorldFactories, removeSet, sleep, withDeadline } from '../helpers/real_worlds.js';
import { stopWorld } from '../helpers/world.js';

const kSize = 4;
/** A test that hangs fails after this instead. */
const kTestMs = 20_000;
/** Sets from init, present in every world of this file. */
const kStaticSets = [
  [0, 1],
  [2, 3],
];

/** Rows [start, start + count) of the even split of `rows` over `size` (reducescatter's). */
function rowsOf(rows: number, size: number, rank: number): [number, number] {
  const base = Math.floor(rows / size);
  const extra = rows % size;
  const count = base + (rank < extra ? 1 : 0);
  const start = rank * base + Math.min(rank, extra);
  return [start, count];
}

function setOf(sets: readonly ProcessSet[], rank: number): ProcessSet {
  const set = sets[rank];
  assert.ok(set, `rank ${rank} has the set`);
  return set;
}

/**
 * One round of allreduce, allgather, broadcast (root: set rank 1), reducescatter and barrier in
 * the set, named as in every other set; checks this rank's results against the set's members.
 */
async function roundInSet(rr: RingReduce, set: ProcessSet, round: number): Promise<void> {
  const rank = rr.rank();
  const me = set.rank();
  const members = set.ranks;
  const opts = { processSet: set };
  const value = (r: number) => (r + 1) * 10 + round;
  const rsInput = (r: number) => Float32Array.from({ length: 4 * 2 }, (_, i) => r * 100 + i + round);
  const [sum, gathered, bc, rs] = await Promise.all([
    rr.allreduce(new Float32Array([value(rank), -value(rank)]), { ...opts, name: 'x' }),
    rr.allgather({ data: new Int32Array(me + 1).fill(value(rank)), shape: [me + 1] }, { ...opts, name: 'g' }),
    rr.broadcast(new Float64Array([value(rank), rank]), { ...opts, name: 'b', root: 1 }),
    rr.reducescatter({ data: rsInput(rank), shape: [4, 2] }, { ...opts, name: 'r' }),
    rr.barrier({ ...opts, name: 'bar' }),
  ]);
  const where = `rank ${rank} in set [${members.join(', ')}], round ${round}`;
  const total = members.reduce((a, r) => a + value(r), 0);
  assert.deepEqual([...sum], [total, -total], `allreduce, ${where}`);
  assert.deepEqual(gathered.shape, [(members.length * (members.length + 1)) / 2], `allgather shape, ${where}`);
  assert.deepEqual(
    [...gathered.data],
    members.flatMap((r, i) => new Array<number>(i + 1).fill(value(r))),
    `allgather, ${where}`,
  );
  const root = members[1] as number;
  assert.deepEqual([...bc], [value(root), root], `broadcast from set rank 1 (job rank ${root}), ${where}`);
  const [start, count] = rowsOf(4, members.length, me);
  const want = Array.from({ length: count * 2 }, (_, i) =>
    members.reduce((a, r) => a + (rsInput(r)[start * 2 + i] as number), 0),
  );
  assert.deepEqual(rs.shape, [count, 2], `reducescatter shape, ${where}`);
  assert.deepEqual([...rs.data], want, `reducescatter, ${where}`);
}

for (const factory of kWorldFactories) {
  describe(`process sets, ${factory.name}, ${kSize} ranks`, () => {
    let world: RingReduce[] = [];
    before(async () => {
      world = await factory.start(kSize, { stallTimeoutMs: 10_000, processSets: kStaticSets });
    });
    after(async () => {
      await stopWorld(world);
    });

    test(
      'static sets from init: numbered 1, 2 on every rank, collectives in each',
      bounded(kTestMs, async () => {
        for (const rr of world) {
          const sets = rr.processSets();
          assert.deepEqual(
            sets.map((s) => [s.id, [...s.ranks]]),
            [
              [1, [0, 1]],
              [2, [2, 3]],
            ],
          );
          const [a, b] = sets as [ProcessSet, ProcessSet];
          assert.equal(a.includes(rr.rank()), rr.rank() < 2);
          assert.equal(b.includes(rr.rank()), rr.rank() >= 2);
          assert.equal(a.rank(), rr.rank() < 2 ? rr.rank() : -1);
          assert.equal(b.rank(), rr.rank() >= 2 ? rr.rank() - 2 : -1);
          assert.equal(a.size(), 2);
        }
        await Promise.all(
          world.map(async (rr) => {
            const set = rr.processSets()[rr.rank() < 2 ? 0 : 1] as ProcessSet;
            for (let round = 0; round < 3; round++) await roundInSet(rr, set, round);
          }),
        );
      }),
    );

    test(
      'disjoint sets {0,2} and {1,3}: the same names at the same time, independent results',
      bounded(kTestMs, async () => {
        const evens = await addSet(world, [0, 2]);
        const odds = await addSet(world, [1, 3]);
        assert.equal(setOf(odds, 0).id, setOf(evens, 0).id + 1);
        for (const [rank, rr] of world.entries()) {
          const ids = rr.processSets().map((s) => s.id);
          assert.ok(ids.includes(setOf(evens, rank).id) && ids.includes(setOf(odds, rank).id));
          assert.equal(setOf(evens, rank).includes(rank), rank % 2 === 0);
          assert.equal(setOf(odds, rank).rank(), rank % 2 === 1 ? (rank - 1) / 2 : -1);
        }
        await Promise.all(
          world.map(async (rr, rank) => {
            const set = setOf(rank % 2 === 0 ? evens : odds, rank);
            // Three rounds: new names, then the sets' response caches (ready rounds, eager scalars).
            for (let round = 0; round < 3; round++) await roundInSet(rr, set, round);
          }),
        );
        await removeSet(world, odds);
        await removeSet(world, evens);
      }),
    );

    test(
      'overlapping sets {0,1,2} and {3,1,2} (set order is not job order): both at once on ranks 1 and 2',
      bounded(kTestMs, async () => {
        const a = await addSet(world, [0, 1, 2]);
        const b = await addSet(world, [3, 1, 2]);
        assert.equal(setOf(b, 3).rank(), 0);
        assert.equal(setOf(b, 1).rank(), 1);
        await Promise.all(
          world.map(async (rr, rank) => {
            const mine = [a, b].map((sets) => setOf(sets, rank)).filter((s) => s.includes(rank));
            // Ranks 1 and 2 submit in opposite set orders.
            if (rank === 2) mine.reverse();
            for (let round = 0; round < 3; round++) await Promise.all(mine.map((set) => roundInSet(rr, set, round)));
          }),
        );
        await removeSet(world, a);
        await removeSet(world, b);
      }),
    );

    test(
      'a set whose member is 3 s late does not hold up the others: their 10 allreduces finish long before',
      bounded(kTestMs, async () => {
        // The static sets [0, 1] and [2, 3] (adding them again would be a duplicate, refused).
        const staticSet = (id: number) => world.map((rr) => rr.processSets().find((s) => s.id === id) as ProcessSet);
        const slow = staticSet(1);
        const fast = staticSet(2);
        // Rank 0 waits in the slow set while it runs this one with rank 2, who runs the fast one too.
        const mixed = await addSet(world, [0, 2]);
        const t0 = performance.now();
        const tenSteps = async (rr: RingReduce, set: ProcessSet) => {
          const others = set.ranks.reduce((a, r) => a + r, 0);
          for (let i = 0; i < 10; i++) {
            const out = await rr.allreduce(new Float32Array(256).fill(rr.rank() + i), { name: 'step', processSet: set });
            assert.equal(out[255], others + 2 * i, `set [${set.ranks.join(', ')}], allreduce ${i}`);
          }
          return performance.now() - t0;
        };
        const lateStep = async (rr: RingReduce) => {
          if (rr.rank() === 1) await sleep(3000);
          const out = await rr.allreduce(new Float32Array([rr.rank() + 1]), { name: 'step', processSet: setOf(slow, rr.rank()) });
          assert.equal(out[0], 3);
          return performance.now() - t0;
        };
        const [[slow0, mixed0], [slow1], [fast2, mixed2], [fast3]] = await Promise.all([
          Promise.all([lateStep(world[0] as RingReduce), tenSteps(world[0] as RingReduce, setOf(mixed, 0))]),
          Promise.all([lateStep(world[1] as RingReduce)]),
          Promise.all([tenSteps(world[2] as RingReduce, setOf(fast, 2)), tenSteps(world[2] as RingReduce, setOf(mixed, 2))]),
          Promise.all([tenSteps(world[3] as RingReduce, setOf(fast, 3))]),
        ]);
        const took = `slow set ${slow0}, ${slow1}; fast set ${fast2}, ${fast3}; mixed set ${mixed0}, ${mixed2} ms`;
        assert.ok((slow0 as number) >= 2900 && (slow1 as number) >= 2900, `the slow set waited for its late member: ${took}`);
        for (const t of [fast2, fast3, mixed0, mixed2]) assert.ok((t as number) < 1500, `10 allreduces well under 3 s: ${took}`);
        await removeSet(world, mixed);
      }),
    );

    test(
      'a set removed while a collective is pending in it: that collective rejects, nothing hangs',
      bounded(kTestMs, async () => {
        const set = await addSet(world, [0, 1, 3]);
        // Rank 0 (the set's coordinator) and rank 3 (another member) each wait for a name the
        // others never submit.
        const pending = [
          world[0]?.allreduce(new Float32Array(4), { name: 'never', processSet: setOf(set, 0) }),
          world[3]?.broadcast(new Float32Array(4), { name: 'also-never', processSet: setOf(set, 3), root: 2 }),
        ] as Promise<unknown>[];
        const outcomes = Promise.allSettled(pending);
        await sleep(100);
        await withDeadline(removeSet(world, set), 5000, 'removeProcessSet');
        const settled = await withDeadline(outcomes, 5000, 'the pending collectives');
        for (const s of settled) {
          assert.equal(s.status, 'rejected');
          const reason = (s as PromiseRejectedResult).reason as Error;
          assert.ok(reason instanceof InvalidArgumentError, `${reason.name}: ${reason.message}`);
          assert.match(reason.message, /process set \d+ was removed/);
        }
        for (const [rank, rr] of world.entries()) {
          assert.ok(setOf(set, rank).removed);
          assert.ok(!rr.processSets().includes(setOf(set, rank)), `rank ${rank} no longer lists the set`);
        }
        // The world and the other sets go on.
        const sums = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([1]), { name: 'after-remove' })));
        assert.deepEqual(
          sums.map((s) => s[0]),
          [4, 4, 4, 4],
        );
      }),
    );

    test(
      'argument errors: InvalidArgumentError, and the ranks still number sets alike',
      bounded(kTestMs, async () => {
        const evens = await addSet(world, [0, 2]);
        const rr0 = world[0] as RingReduce;
        const rr1 = world[1] as RingReduce;
        const x = new Float32Array(2);
        // A set this rank is not in, for every kind of call.
        const notIn = /rank 1 is not in process set \d+ \(ranks \[0, 2\]\)/;
        const outside = setOf(evens, 1);
        await assert.rejects(
          rr1.allreduce(x, { processSet: outside }),
          (e) => e instanceof InvalidArgumentError && notIn.test(e.message),
        );
        await assert.rejects(rr1.allgather(x, { processSet: outside }), InvalidArgumentError);
        await assert.rejects(rr1.broadcast(x, { processSet: outside }), InvalidArgumentError);
        await assert.rejects(rr1.reducescatter(x, { processSet: outside }), InvalidArgumentError);
        await assert.rejects(rr1.barrier({ processSet: outside }), notIn);
        await assert.rejects(rr1.join({ processSet: outside }), notIn);
        await assert.rejects(rr1.groupedAllreduce([x, x], { processSet: outside }), notIn);
        // Not a set of this runtime.
        const foreign = /option 'processSet' must be a ProcessSet of this runtime/;
        await assert.rejects(rr1.allreduce(x, { processSet: setOf(evens, 0) }), foreign);
        await assert.rejects(rr0.allreduce(x, { processSet: { id: 1 } as unknown as ProcessSet }), foreign);
        // Roots inside the set.
        await assert.rejects(
          rr0.broadcast(x, { processSet: setOf(evens, 0), root: 2 }),
          (e) => e instanceof InvalidArgumentError && /option 'root' must be an integer rank in \[0, 1\], got 2/.test(e.message),
        );
        // Bad members: refused before anything is sent.
        const bad: [unknown, RegExp][] = [
          [[0, 0], /name a rank twice/],
          [[1, 3, 1], /name a rank twice/],
          [[0, 4], /process set rank 4 is not a rank of this job of 4/],
          [[-1], /process set rank -1 is not a rank/],
          [[1.5], /process set rank 1\.5 is not a rank/],
          [[], /non-empty array/],
          ['0,1', /non-empty array/],
          // As Horovod: a set of every rank (its global set), or the ranks of a set that exists, in any order.
          [[0, 1, 2, 3], /process set ranks \[0, 1, 2, 3\] are every rank of the job/],
          [[3, 1, 0, 2], /process set ranks \[3, 1, 0, 2\] are every rank of the job/],
          [[0, 2], /process set ranks \[0, 2\] are the members of process set \d+ \(\[0, 2\]\) already/],
          [[2, 0], /process set ranks \[2, 0\] are the members of process set \d+ \(\[0, 2\]\) already/],
          [[1, 0], /process set ranks \[1, 0\] are the members of process set 1 \(\[0, 1\]\) already/],
        ];
        for (const [ranks, pattern] of bad) {
          await assert.rejects(
            rr0.addProcessSet(ranks as number[]),
            (e) => e instanceof InvalidArgumentError && pattern.test(e.message),
            `addProcessSet(${JSON.stringify(ranks)})`,
          );
        }
        // Removal: only a live set of this runtime, once.
        await assert.rejects(rr1.removeProcessSet(setOf(evens, 0)), InvalidArgumentError);
        await assert.rejects(rr1.removeProcessSet({} as ProcessSet), /removeProcessSet needs a process set of this runtime/);
        await removeSet(world, evens);
        await assert.rejects(rr0.removeProcessSet(setOf(evens, 0)), /that is not removed/);
        // A removed set, for a member.
        const removed = /process set \d+ was removed/;
        await assert.rejects(
          rr0.allreduce(x, { processSet: setOf(evens, 0) }),
          (e) => e instanceof InvalidArgumentError && removed.test(e.message),
        );
        await assert.rejects(world[2]?.barrier({ processSet: setOf(evens, 2) }) as Promise<void>, removed);
        // None of the refused calls took an id: the next set has the same one everywhere, and works.
        const next = await addSet(world, [3, 0]);
        assert.equal(setOf(next, 0).id, setOf(evens, 0).id + 1);
        const sums = await Promise.all(
          [0, 3].map((r) => world[r]?.allreduce(new Int32Array([r]), { processSet: setOf(next, r), name: 'next' })),
        );
        assert.deepEqual(
          sums.map((s) => s?.[0]),
          [3, 3],
        );
        await removeSet(world, next);
        // Once removed, the same ranks make a set again.
        await removeSet(world, await addSet(world, [0, 3]));
      }),
    );

    test(
      'addProcessSet with different ranks on different ranks: MismatchError everywhere, the job goes on',
      bounded(kTestMs, async () => {
        const before = world.map((rr) => rr.processSets().length);
        const calls = world.map((rr, rank) => rr.addProcessSet(rank < 2 ? [0, 3] : [0, 2]));
        await expectSameRejection(calls, MismatchError, /process sets/, 'addProcessSet');
        assert.deepEqual(
          world.map((rr) => rr.processSets().length),
          before,
          'no set was added',
        );
        const set = await addSet(world, [1, 2]);
        const outs = await Promise.all(
          [1, 2].map((r) => world[r]?.allgather(new Int32Array([r, r]), { processSet: setOf(set, r), name: 'after-mismatch' })),
        );
        for (const out of outs) assert.deepEqual([...(out ?? [])], [1, 1, 2, 2]);
        const sums = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([2]), { name: 'after-mismatch' })));
        assert.deepEqual(
          sums.map((s) => s[0]),
          [8, 8, 8, 8],
        );
        await removeSet(world, set);
      }),
    );

    test(
      "a set's collective and the world's with the same name at the same time",
      bounded(kTestMs, async () => {
        const set = await addSet(world, [2, 1]);
        for (let round = 0; round < 3; round++) {
          const results = await Promise.all(
            world.map(async (rr, rank) => {
              const inWorld = () => rr.allreduce(new Float32Array(8).fill(rank + round), { name: 'same' });
              if (!setOf(set, rank).includes(rank)) return [await inWorld()];
              const inSet = () =>
                rr.allreduce(new Float32Array(8).fill(100 * rank + round), { name: 'same', processSet: setOf(set, rank) });
              // Rank 1 submits the set's first, rank 2 the world's.
              return rank === 1
                ? Promise.all([inWorld(), inSet()])
                : Promise.all([inWorld(), inSet()].reverse()).then((r) => r.reverse());
            }),
          );
          for (const [rank, outs] of results.entries()) {
            assert.equal(outs[0]?.[7], 6 + 4 * round, `world 'same' on rank ${rank}, round ${round}`);
            if (outs.length > 1) assert.equal(outs[1]?.[7], 300 + 2 * round, `set 'same' on rank ${rank}, round ${round}`);
          }
        }
        await removeSet(world, set);
      }),
    );
  });
}

test('init refuses bad static sets with InvalidArgumentError', async () => {
  const common = { rank: 0, size: 4, storeAddress: '127.0.0.1:1' };
  await assert.rejects(
    RingReduce.init({ ...common, processSets: [[0, 4]] }),
    (e) => e instanceof InvalidArgumentError && /processSets\[0\]/.test(e.message),
  );
  await assert.rejects(
    RingReduce.init({ ...common, processSets: [[0], [1, 2, 1]] }),
    (e) => e instanceof InvalidArgumentError && /processSets\[1\].*twice/.test(e.message),
  );
  assert.throws(() => startMemoryWorld(2, { processSets: [[2]] }), InvalidArgumentError);
  // As Horovod and addProcessSet: not every rank, not the same ranks twice (in any order).
  await assert.rejects(
    RingReduce.init({
      ...common,
      processSets: [
        [0, 1],
        [3, 2, 1, 0],
      ],
    }),
    (e) => e instanceof InvalidArgumentError && /processSets\[1\]' is every rank of the job/.test(e.message),
  );
  await assert.rejects(
    RingReduce.init({ ...common, processSets: [[0, 2], [1], [2, 0]] }),
    (e) => e instanceof InvalidArgumentError && /processSets\[2\]' has the ranks of 'processSets\[0\]'/.test(e.message),
  );
});
