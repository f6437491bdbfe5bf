/**
 * Grouped collectives with real ranks (4), over the memory world and TCP worker threads: results
 * in order with mixed dtypes and shapes, fusion (memory world: the engines' execution counts),
 * atomicity (a member missing on one rank holds the whole group back; stalled, it fails the group
 * with a TimeoutError naming it on every rank), groupedAllgather, groupedReducescatter,
 * groupedBroadcast, per-member 'outs' (in place), and a group in a process set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ProcessSet, RingReduce } from '../../src/api/runtime.js';
import { InvalidArgumentError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import type { TypedArray } from '../../src/core/types.js';
import { allreduceGroupMember, memoryEngineOf } from '../helpers/group_member.js';
import { addSet, bounded, kWorldFactories, removeSet, sleep, withDeadline } from '../helpers/real_worlds.js';
import { startWorld, stopWorld } from '../helpers/world.js';

const kSize = 4;
const kStallTimeoutMs = 1500;
const kTestMs = 20_000;

/** Rows [start, count) of the even split of `rows` over `size` ranks (reducescatter's). */
function rowsOf(rows: number, size: number, rank: number): [number, number] {
  const base = Math.floor(rows / size);
  const extra = rows % size;
  return [rank * base + Math.min(rank, extra), base + (rank < extra ? 1 : 0)];
}

/** The tensors of the mixed group, for `rank` at iteration `it`: typed arrays and shaped tensors. */
function mixedTensors(rank: number, it: number) {
  return [
    Float32Array.from({ length: 5 }, (_, i) => rank + i * 0.5 + it),
    { data: Int32Array.from({ length: 6 }, (_, i) => rank * 10 - i + it), shape: [2, 3] },
    Float64Array.from({ length: 3000 }, (_, i) => rank * i + it),
    { data: new Float32Array(16).fill(rank + it), shape: [4, 4] },
    Uint8Array.from({ length: 3 }, (_, i) => rank + i + it),
    BigInt64Array.from([BigInt(rank + it) << 40n, -BigInt(rank)]),
  ] as const;
}

/** Element-wise sum over ranks of the mixed group's member `m`, as plain numbers (BigInts as they are). */
function mixedSum(m: number, it: number): (number | bigint)[] {
  const parts = Array.from({ length: kSize }, (_, r) => {
    const t = mixedTensors(r, it)[m] as TypedArray | { data: TypedArray };
    return [...(ArrayBuffer.isView(t) ? t : t.data)] as (number | bigint)[];
  });
  return (parts[0] as (number | bigint)[]).map((_, i) =>
    parts.reduce<number | bigint>(
      (a, p) => (typeof a === 'bigint' ? a + (p[i] as bigint) : a + (p[i] as number)),
      typeof parts[0]?.[0] === 'bigint' ? 0n : 0,
    ),
  );
}

interface ExecutionCounts {
  executions: number;
  fused: number;
}

/** Each memory rank's world executions so far, and how many were fused. */
function executionCounts(world: readonly RingReduce[]): ExecutionCounts[] {
  return world.map((rr) => ({ ...memoryEngineOf(rr).executionCounts }));
}

/** Each rank's executions and fused executions since `before`. */
function countsSince(world: readonly RingReduce[], before: readonly ExecutionCounts[]): ExecutionCounts[] {
  return executionCounts(world).map((c, rank) => ({
    executions: c.executions - (before[rank]?.executions ?? 0),
    fused: c.fused - (before[rank]?.fused ?? 0),
  }));
}

function dataOf(x: unknown): TypedArray {
  return ArrayBuffer.isView(x) ? (x as TypedArray) : (x as { data: TypedArray }).data;
}

for (const factory of kWorldFactories) {
  describe(`grouped collectives, ${factory.name}, ${kSize} ranks`, () => {
    let world: RingReduce[] = [];
    before(async () => {
      world = await factory.start(kSize, { stallTimeoutMs: kStallTimeoutMs });
    });
    after(async () => {
      await withDeadline(stopWorld(world), 10_000, 'shutdown');
    });

    test(
      'groupedAllreduce: results in order, mixed dtypes and shapes, each of the kind passed',
      bounded(kTestMs, async () => {
        for (let it = 0; it < 3; it++) {
          const results = await Promise.all(
            world.map((rr, rank) => rr.groupedAllreduce(mixedTensors(rank, it), { name: 'mix' })),
          );
          for (const [rank, outs] of results.entries()) {
            const ins = mixedTensors(rank, it);
            assert.equal(outs.length, ins.length);
            for (const [m, out] of outs.entries()) {
              const input = ins[m];
              const where = `member ${m}, rank ${rank}, iteration ${it}`;
              if (ArrayBuffer.isView(input)) {
                assert.equal((out as TypedArray).constructor, input.constructor, `kind, ${where}`);
              } else {
                assert.deepEqual((out as unknown as { shape: number[] }).shape, input.shape, `shape, ${where}`);
                assert.equal(dataOf(out).constructor, input.data.constructor, `kind, ${where}`);
              }
              const want = mixedSum(m, it);
              // uint8 wraps like C.
              const wrapped = input instanceof Uint8Array ? want.map((v) => (v as number) & 0xff) : want;
              assert.deepEqual([...dataOf(out)], wrapped, `values, ${where}`);
            }
          }
        }
        // Other ops, and unnamed groups matched by call order.
        const maxes = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedAllreduce([new Float32Array([rank, 5 - rank]), new Int32Array([rank * 3, 7 - rank, 0])], { op: 'max' }),
          ),
        );
        for (const [a, b] of maxes) {
          assert.deepEqual([...(a as Float32Array)], [3, 5]);
          assert.deepEqual([...(b as Int32Array)], [9, 7, 0]);
        }
        const averages = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedAllreduce([new Float64Array([rank * 2]), { data: new Float32Array(4).fill(rank), shape: [2, 2] }], {
              op: 'average',
            }),
          ),
        );
        for (const [a, b] of averages) {
          assert.deepEqual([...dataOf(a)], [3]);
          assert.deepEqual([...dataOf(b)], [1.5, 1.5, 1.5, 1.5]);
        }
      }),
    );

    test(
      "outs: each member's result in its own buffer, the tensors themselves in place (a model's gradients); reducescatter and allgather too",
      bounded(kTestMs, async () => {
        const shared = <A extends TypedArray>(make: new (b: SharedArrayBuffer) => A, bytes: number) =>
          new make(new SharedArrayBuffer(bytes));
        const grads = world.map((_, rank) => ({
          a: shared(Float32Array, 12).fill(rank),
          b: { data: shared(Int32Array, 16).fill(rank), shape: [2, 2] },
          c: shared(Float64Array, 8 * 2000).fill(rank),
        }));
        for (let it = 0; it < 2; it++) {
          const results = await Promise.all(
            world.map((rr, rank) => {
              const { a, b, c } = grads[rank] as (typeof grads)[number];
              // a and b in place, c into fresh memory.
              return rr.groupedAllreduce([a, b, c], { name: 'outs', outs: [a, b.data, undefined] });
            }),
          );
          const sum = it === 0 ? 6 : 24; // in place: the second round sums the first one's sums
          for (const [rank, [a, b, c]] of results.entries()) {
            const mine = grads[rank] as (typeof grads)[number];
            assert.equal(a, mine.a, `rank ${rank}: a is its out`);
            assert.equal(dataOf(b), mine.b.data, `rank ${rank}: b is its out`);
            assert.deepEqual((b as { shape: readonly number[] }).shape, [2, 2]);
            assert.notEqual(dataOf(c), mine.c, `rank ${rank}: c is fresh`);
            assert.ok(mine.a.every((v) => v === sum) && mine.b.data.every((v) => v === sum), `rank ${rank}: in place, ${it}`);
            assert.ok(dataOf(c).every((v) => v === 6) && mine.c.every((v) => v === rank), `rank ${rank}: c, ${it}`);
          }
        }
        const rsOuts = world.map(() => [shared(Float32Array, 4 * 2), shared(Uint16Array, 2 * 3)]);
        const scattered = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedReducescatter(
              [
                { data: new Float32Array(8).fill(rank), shape: [4, 2] },
                { data: new Uint16Array(12).fill(rank), shape: [4, 3] },
              ],
              { name: 'outs-rs', outs: rsOuts[rank] },
            ),
          ),
        );
        for (const [rank, [a, b]] of scattered.entries()) {
          assert.equal(dataOf(a), rsOuts[rank]?.[0]);
          assert.equal(dataOf(b), rsOuts[rank]?.[1]);
          assert.deepEqual([...dataOf(a), ...dataOf(b)], [6, 6, 6, 6, 6]);
        }
        const agOut = world.map(() => shared(Int8Array, kSize * 2));
        const gathered = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedAllgather([new Int8Array([rank, -rank]), new Float32Array([rank])], {
              name: 'outs-ag',
              outs: [agOut[rank], undefined],
            }),
          ),
        );
        for (const [rank, [a, b]] of gathered.entries()) {
          assert.equal(a, agOut[rank]);
          assert.deepEqual([...(a as Int8Array)], [0, 0, 1, -1, 2, -2, 3, -3]);
          assert.deepEqual([...(b as Float32Array)], [0, 1, 2, 3]);
        }
      }),
    );

    test(
      "groupedBroadcast: the root's tensors of mixed dtypes and shapes, in order, of the kind passed; outs in place; unnamed",
      bounded(kTestMs, async () => {
        for (const root of [0, kSize - 1]) {
          const results = await Promise.all(
            world.map((rr, rank) => rr.groupedBroadcast(mixedTensors(rank, 0), { name: `bc/${root}`, root })),
          );
          for (const [rank, outs] of results.entries()) {
            const sent = mixedTensors(root, 0);
            assert.equal(outs.length, sent.length);
            for (const [m, out] of outs.entries()) {
              const input = sent[m] as TypedArray | { data: TypedArray; shape: number[] };
              const where = `member ${m}, rank ${rank}, root ${root}`;
              assert.equal(ArrayBuffer.isView(out), ArrayBuffer.isView(input), `kind, ${where}`);
              if (!ArrayBuffer.isView(input)) assert.deepEqual((out as { shape: readonly number[] }).shape, input.shape, where);
              assert.deepEqual([...dataOf(out)], [...dataOf(input)], `values, ${where}`);
            }
          }
        }
        const weights = world.map((_, rank) => new Float64Array(new SharedArrayBuffer(8 * 5)).fill(rank + 0.5));
        const unnamed = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedBroadcast([weights[rank] as Float64Array, new Uint32Array([rank])], {
              outs: [weights[rank], undefined],
            }),
          ),
        );
        for (const [rank, [w, u]] of unnamed.entries()) {
          assert.equal(w, weights[rank]);
          assert.deepEqual([...(weights[rank] as Float64Array)], [0.5, 0.5, 0.5, 0.5, 0.5], `rank ${rank}: in place from root 0`);
          assert.deepEqual([...(u as Uint32Array)], [0]);
        }
      }),
    );

    test(
      'argument errors: an empty group, a bad member (nothing is submitted: the name stays free)',
      bounded(kTestMs, async () => {
        const rr0 = world[0] as RingReduce;
        await assert.rejects(rr0.groupedAllreduce([], { name: 'bad' }), /groupedAllreduce needs a non-empty array of tensors/);
        await assert.rejects(rr0.groupedAllgather('x' as never), InvalidArgumentError);
        await assert.rejects(rr0.groupedAllreduce([new Float32Array(2), 'x' as never], { name: 'bad' }), InvalidArgumentError);
        await assert.rejects(rr0.groupedAllreduce([new Int32Array(2)], { name: 'bad', op: 'average' }), /average/);
        await assert.rejects(rr0.groupedBroadcast([], { name: 'bad' }), /groupedBroadcast needs a non-empty array of tensors/);
        await assert.rejects(rr0.groupedBroadcast([new Int32Array(2)], { name: 'bad', root: kSize }), /option 'root'/);
        const f2 = new Float32Array(new SharedArrayBuffer(8));
        await assert.rejects(
          rr0.groupedAllreduce([f2, f2], { name: 'bad', out: f2 } as never),
          (e) =>
            e instanceof InvalidArgumentError &&
            /groupedAllreduce takes option 'outs' \(one typed array per tensor/.test(e.message),
        );
        await assert.rejects(
          rr0.groupedAllgather([f2, f2], { name: 'bad', outs: [f2] }),
          /option 'outs' of groupedAllgather must be an array of 2 typed arrays \(or undefined\), one for each tensor in order, got an array of 1/,
        );
        await assert.rejects(
          rr0.groupedAllreduce([f2, new Float32Array(3)], { name: 'bad', outs: [undefined, f2] }),
          (e) => e instanceof InvalidArgumentError && /option 'outs\[1\]' has 2 elements but the tensor has 3/.test(e.message),
        );
        const outs = await Promise.all(
          world.map((rr) => rr.groupedAllreduce([new Float32Array([1]), new Int32Array([2])], { name: 'bad' })),
        );
        for (const [a, b] of outs) assert.deepEqual([dataOf(a)[0], dataOf(b)[0]], [4, 8]);
      }),
    );

    if (factory.name === 'memory') {
      test(
        'fused: a group of one dtype runs as one execution, a group of two dtypes as two',
        bounded(kTestMs, async () => {
          const counts = () => executionCounts(world);
          const delta = (before: ExecutionCounts[]) => countsSince(world, before);
          const sameDtype = (rank: number) => [
            new Float32Array(10).fill(rank),
            new Float32Array(2000).fill(rank),
            { data: new Float32Array(9).fill(rank), shape: [3, 3] },
            new Float32Array(1).fill(rank),
          ];
          for (let it = 0; it < 2; it++) {
            const before = counts();
            const outs = await Promise.all(world.map((rr, rank) => rr.groupedAllreduce(sameDtype(rank), { name: 'fuse1' })));
            for (const out of outs) for (const t of out) assert.ok(dataOf(t).every((v) => v === 6));
            assert.deepEqual(delta(before), new Array(kSize).fill({ executions: 1, fused: 1 }), `iteration ${it}`);
          }
          const twoDtypes = (rank: number) => [
            new Float32Array(10).fill(rank),
            new Float32Array(30).fill(rank),
            new Int32Array(20).fill(rank),
            { data: new Int32Array(4).fill(rank), shape: [2, 2] },
          ];
          const before = counts();
          const outs = await Promise.all(world.map((rr, rank) => rr.groupedAllreduce(twoDtypes(rank), { name: 'fuse2' })));
          for (const out of outs) for (const t of out) assert.ok(dataOf(t).every((v) => v === 6));
          assert.deepEqual(delta(before), new Array(kSize).fill({ executions: 2, fused: 2 }));
          // The same four one at a time: four executions, none fused (the counts mean what they say).
          const alone = counts();
          for (const [i, t] of twoDtypes(0).entries()) {
            await Promise.all(world.map((rr) => rr.allreduce(t, { name: `alone/${i}` })));
          }
          assert.deepEqual(delta(alone), new Array(kSize).fill({ executions: 4, fused: 0 }));
        }),
      );

      test(
        'fused: a group with interleaved dtypes (f32, i32, f32, i32) still runs as one fused execution per dtype',
        bounded(kTestMs, async () => {
          const counts = () => executionCounts(world);
          const delta = (before: ExecutionCounts[]) => countsSince(world, before);
          const interleaved = (rank: number) => [
            new Float32Array(10).fill(rank),
            new Int32Array(20).fill(rank),
            new Float32Array(30).fill(rank),
            { data: new Int32Array(4).fill(rank), shape: [2, 2] },
          ];
          const beforeInterleaved = counts();
          const mixed = await Promise.all(world.map((rr, rank) => rr.groupedAllreduce(interleaved(rank), { name: 'fuse3' })));
          for (const out of mixed) for (const t of out) assert.ok(dataOf(t).every((v) => v === 6));
          assert.deepEqual(delta(beforeInterleaved), new Array(kSize).fill({ executions: 2, fused: 2 }), 'f32, i32, f32, i32');
        }),
      );
    }

    test(
      'a repeated group is agreed from the response cache as one id; a changed member, a mismatch and a stall of the cached group',
      bounded(kTestMs, async () => {
        const tensors = (rank: number, it: number, long = false) => [
          new Float32Array(3).fill(rank + it),
          new Float64Array(long ? 5 : 2).fill(rank * 2 + it),
          new Int32Array(4).fill(rank + 1),
        ];
        const sums = (it: number) => [6 + 4 * it, 12 + 4 * it, 10];
        // Requests that travelled as cache ids: rr.stats() with an engine thread, the engine itself in a memory world.
        const hits = () =>
          world.map((rr) => (factory.name === 'memory' ? memoryEngineOf(rr).cacheHits.requests : rr.stats().cacheHits));
        const run = (it: number, long = false) =>
          Promise.all(world.map((rr, rank) => rr.groupedAllreduce(tensors(rank, it, long), { name: 'cached' })));
        const check = (results: unknown[][], it: number, what: string) => {
          for (const [rank, outs] of results.entries())
            for (const [m, out] of outs.entries())
              assert.ok(
                [...dataOf(out)].every((v) => v === sums(it)[m]),
                `${what}: rank ${rank} member ${m}: ${[...dataOf(out)]} != ${sums(it)[m]}`,
              );
        };
        // The first call is negotiated by rank 0 and learned; the next ones are cache hits, all three members.
        check(await run(0), 0, 'first');
        for (let it = 1; it < 4; it++) {
          const before = hits();
          check(await run(it), it, `iteration ${it}`);
          assert.deepEqual(
            hits().map((h, rank) => h - (before[rank] as number)),
            [3, 3, 3, 3],
            `iteration ${it}: every member a cache hit on every rank`,
          );
        }
        // A member of another length on every rank: not the cached group (rank 0 again), right, then cached anew.
        check(await run(4, true), 4, 'a longer member');
        check(await run(5, true), 5, 'a longer member again');
        const before = hits();
        check(await run(6, true), 6, 'cached anew');
        assert.deepEqual(
          hits().map((h, rank) => h - (before[rank] as number)),
          [3, 3, 3, 3],
          'the changed group cached anew',
        );
        // Rank 0's member of another length: the whole group fails alike on every rank, then the name works again.
        const mismatch = await Promise.allSettled(
          world.map((rr, rank) => rr.groupedAllreduce(tensors(rank, 7, rank === 0), { name: 'cached' })),
        );
        const reasons = mismatch.map((m, rank) => {
          assert.equal(m.status, 'rejected', `rank ${rank} should have failed`);
          return ((m as PromiseRejectedResult).reason as Error).message;
        });
        assert.equal(new Set(reasons).size, 1, `the same failure everywhere: ${reasons.join(' | ')}`);
        assert.match(reasons[0] as string, /group 'cached'/);
        check(await run(8, true), 8, 'after the mismatch');
        check(await run(9, true), 9, 'cached after the mismatch');
        // The cached group stalls: rank 3 does not call it; the others fail with its deadline, naming rank 3.
        const stalled = await Promise.allSettled(
          world.slice(0, 3).map((rr, rank) => rr.groupedAllreduce(tensors(rank, 10, true), { name: 'cached', timeoutMs: 300 })),
        );
        for (const [rank, s] of stalled.entries()) {
          assert.equal(s.status, 'rejected', `rank ${rank} should have timed out`);
          const reason = (s as PromiseRejectedResult).reason as Error;
          assert.ok(reason instanceof TimeoutError, `rank ${rank}: ${reason.name}: ${reason.message}`);
          assert.match(reason.message, /ranks? 3 did not submit it/);
        }
        check(await run(11, true), 11, 'after the stall');
        // With 'outs' a repeat reuses the members' checked preparations (api/repeats.ts): each step still
        // reduces that step's input, in a fresh options object and array of the same values each time.
        const inputs = world.map(() => [new Float32Array(3), new Int32Array(2)] as const);
        const outputs = world.map(
          () => [new Float32Array(new SharedArrayBuffer(12)), new Int32Array(new SharedArrayBuffer(8))] as const,
        );
        for (let it = 0; it < 4; it++) {
          const results = await Promise.all(
            world.map((rr, rank) => {
              const [x, y] = inputs[rank] as (typeof inputs)[number];
              x.fill(rank + it);
              y.fill(rank * it);
              const [ox, oy] = outputs[rank] as (typeof outputs)[number];
              return rr.groupedAllreduce([x, y], { name: 'outs-loop', outs: [ox, oy] });
            }),
          );
          for (const [rank, [x, y]] of results.entries()) {
            assert.equal(x, outputs[rank]?.[0], `iteration ${it}: the result is the given output`);
            assert.deepEqual([...dataOf(x)], [6 + 4 * it, 6 + 4 * it, 6 + 4 * it], `iteration ${it}, rank ${rank}`);
            assert.deepEqual([...dataOf(y)], [6 * it, 6 * it], `iteration ${it}, rank ${rank}`);
          }
        }
      }),
    );

    test(
      'a bound group (outs, repeated: one ring entry per call with an engine thread) reduces each step, fails whole on a stall, binds anew',
      bounded(kTestMs, async () => {
        const kMembers = 12;
        const inputs = world.map(() => Array.from({ length: kMembers }, (_, m) => new Float32Array(3 + (m % 4) * 700)));
        const outputs = world.map((_, rank) =>
          (inputs[rank] as Float32Array[]).map((x) => new Float32Array(new SharedArrayBuffer(x.byteLength))),
        );
        const call = (rank: number, it: number) => {
          for (const [m, x] of (inputs[rank] as Float32Array[]).entries()) x.fill(rank * (m + 1) + it);
          // The same options each step (a deadline included): a repeat is the very same request.
          return (world[rank] as RingReduce).groupedAllreduce(inputs[rank] as Float32Array[], {
            name: 'bound',
            outs: outputs[rank] as Float32Array[],
            timeoutMs: 400,
          });
        };
        const run = async (it: number, what: string) => {
          const results = await Promise.all(world.map((_, rank) => call(rank, it)));
          for (const [rank, outs] of results.entries()) {
            assert.deepEqual(outs, outputs[rank], `${what}: rank ${rank}'s results are its outs`);
            for (const [m, out] of outs.entries()) {
              const want = 6 * (m + 1) + 4 * it;
              assert.ok(
                out.every((v) => v === want),
                `${what}: rank ${rank} member ${m}: ${out[0]} != ${want}`,
              );
            }
          }
        };
        for (let it = 0; it < 5; it++) await run(it, `step ${it}`);
        // Rank 3 does not call the bound group: the others fail with its deadline, naming rank 3, once each.
        const stalled = await Promise.allSettled(world.slice(0, 3).map((_, rank) => call(rank, 5)));
        for (const [rank, s] of stalled.entries()) {
          assert.equal(s.status, 'rejected', `rank ${rank} should have timed out`);
          const reason = (s as PromiseRejectedResult).reason as Error;
          assert.ok(reason instanceof TimeoutError, `rank ${rank}: ${reason.name}: ${reason.message}`);
          assert.match(reason.message, /ranks? 3 did not submit it/);
        }
        for (let it = 6; it < 8; it++) await run(it, `after the stall, step ${it}`);
        // A member's output anew on every rank: the group binds again, and repeats as before.
        for (const outs of outputs) outs[5] = new Float32Array(new SharedArrayBuffer(outs[5]?.byteLength ?? 0));
        for (let it = 8; it < 11; it++) await run(it, `member 5 anew, step ${it}`);
      }),
    );

    test(
      'atomic: a member missing on one rank holds the whole group back until it arrives',
      bounded(kTestMs, async () => {
        for (let it = 0; it < 2; it++) {
          const value = (rank: number, m: number) => (rank + 1) * (m + 1) + it;
          const tensors = (rank: number) => [
            new Float32Array(8).fill(value(rank, 0)),
            new Int32Array(1000).fill(value(rank, 1)),
            new Float32Array(3).fill(value(rank, 2)),
          ];
          const settled: string[] = [];
          const mark = <T>(what: string, p: Promise<T>) =>
            p.then((v) => {
              settled.push(what);
              return v;
            });
          const calls: Promise<unknown>[] = [];
          for (const [rank, rr] of world.entries()) {
            if (rank === 2) {
              for (const index of [0, 1]) {
                calls.push(
                  mark(
                    `rank 2 member ${index}`,
                    allreduceGroupMember(rr, tensors(2)[index] as TypedArray, { group: 'late', size: 3, index }),
                  ),
                );
              }
            } else {
              calls.push(mark(`rank ${rank} group`, rr.groupedAllreduce(tensors(rank), { name: 'late' })));
            }
          }
          await sleep(500);
          assert.deepEqual(settled, [], `iteration ${it}: nothing runs before the last member is in`);
          const last = mark(
            'rank 2 member 2',
            allreduceGroupMember(world[2] as RingReduce, tensors(2)[2] as TypedArray, { group: 'late', size: 3, index: 2 }),
          );
          const results = await Promise.all([...calls, last]);
          assert.equal(settled.length, 6);
          const sum = (m: number) => [0, 1, 2, 3].reduce((a, r) => a + value(r, m), 0);
          for (const [i, result] of results.entries()) {
            const outs = Array.isArray(result) ? (result as TypedArray[]) : undefined;
            if (outs)
              for (const [m, out] of outs.entries())
                assert.ok(
                  out.every((v) => v === sum(m)),
                  `member ${m}: ${out[0]}`,
                );
            else {
              // Rank 2's members, in submission order: 0, 1, then 2.
              const m = i === 2 ? 0 : i === 3 ? 1 : 2;
              assert.ok(
                (result as TypedArray).every((v) => v === sum(m)),
                `rank 2 member ${m}: ${(result as TypedArray)[0]}`,
              );
            }
          }
        }
      }),
    );

    test(
      'a member that never arrives on one rank: the whole group fails with a TimeoutError naming it, on every rank',
      bounded(kTestMs, async () => {
        const calls: Promise<unknown>[] = [];
        for (const [rank, rr] of world.entries()) {
          const tensors = [new Float32Array([rank]), new Int32Array([rank, rank]), new Float32Array(100).fill(rank)];
          if (rank === 2) {
            for (const index of [0, 1])
              calls.push(allreduceGroupMember(rr, tensors[index] as TypedArray, { group: 'stall', size: 3, index }));
          } else calls.push(rr.groupedAllreduce(tensors, { name: 'stall' }));
        }
        const t0 = performance.now();
        const settled = await Promise.allSettled(calls);
        const waited = performance.now() - t0;
        assert.ok(waited >= kStallTimeoutMs - 100, `failed after the stall timeout: ${waited} ms`);
        const messages = settled.map((s, i) => {
          assert.equal(s.status, 'rejected', `call ${i}`);
          const reason = (s as PromiseRejectedResult).reason as Error;
          assert.ok(reason instanceof TimeoutError, `call ${i}: ${reason.name}: ${reason.message}`);
          assert.match(reason.message, /'stall\/2'.*ranks 2 did not submit it/);
          return reason.message;
        });
        assert.equal(new Set(messages).size, 1, `the same message everywhere: ${messages.join(' | ')}`);
        // The job goes on, the group's name too.
        const outs = await Promise.all(
          world.map((rr, rank) => rr.groupedAllreduce([new Float32Array([rank]), new Int32Array([1])], { name: 'stall' })),
        );
        for (const [a, b] of outs) assert.deepEqual([dataOf(a)[0], dataOf(b)[0]], [6, 4]);
      }),
    );

    test(
      'groupedAllgather and groupedReducescatter: mixed dtypes, shapes and first dimensions',
      bounded(kTestMs, async () => {
        const gatherIn = (rank: number) => [
          { data: Float32Array.from({ length: (rank + 1) * 2 }, (_, i) => rank * 100 + i), shape: [rank + 1, 2] },
          { data: new Int32Array((4 - rank) * 3).fill(rank), shape: [4 - rank, 3] },
          // Rank 0 gives no rows.
          Uint8Array.from({ length: rank }, () => rank),
        ];
        const gathered = await Promise.all(world.map((rr, rank) => rr.groupedAllgather(gatherIn(rank), { name: 'gg' })));
        for (const outs of gathered) {
          const [a, b, c] = outs as [{ data: Float32Array; shape: number[] }, { data: Int32Array; shape: number[] }, Uint8Array];
          assert.deepEqual(a.shape, [10, 2]);
          assert.deepEqual(
            [...a.data],
            [0, 1, 2, 3].flatMap((r) => [...dataOf(gatherIn(r)[0])]),
          );
          assert.deepEqual(b.shape, [10, 3]);
          assert.deepEqual(
            [...b.data],
            [0, 1, 2, 3].flatMap((r) => new Array<number>((4 - r) * 3).fill(r)),
          );
          assert.ok(c instanceof Uint8Array);
          assert.deepEqual([...c], [1, 2, 2, 3, 3, 3]);
        }
        const rsIn = (rank: number) => [
          { data: Float32Array.from({ length: 16 }, (_, i) => rank * i), shape: [8, 2] },
          { data: Int32Array.from({ length: 18 }, (_, i) => rank - i), shape: [6, 3] },
          Float64Array.from({ length: 5 }, (_, i) => rank + i),
        ];
        const scattered = await Promise.all(world.map((rr, rank) => rr.groupedReducescatter(rsIn(rank), { name: 'grs' })));
        for (const [rank, outs] of scattered.entries()) {
          for (const [m, out] of outs.entries()) {
            const input = rsIn(rank)[m] as TypedArray | { data: TypedArray; shape: number[] };
            const shape = ArrayBuffer.isView(input) ? [input.length] : input.shape;
            const rowSize = shape.slice(1).reduce((a, b) => a * b, 1);
            const [start, count] = rowsOf(shape[0] as number, kSize, rank);
            const total = (i: number) => [0, 1, 2, 3].reduce((a, r) => a + (dataOf(rsIn(r)[m])[i] as number), 0);
            const want = Array.from({ length: count * rowSize }, (_, i) => total(start * rowSize + i));
            if (!ArrayBuffer.isView(input))
              assert.deepEqual((out as unknown as { shape: number[] }).shape, [count, ...shape.slice(1)]);
            assert.deepEqual([...dataOf(out)], want, `reducescatter member ${m}, rank ${rank}`);
          }
        }
        const averaged = await Promise.all(
          world.map((rr, rank) =>
            rr.groupedReducescatter([new Float32Array(4).fill(rank), new Float64Array(8).fill(2 * rank)], {
              name: 'grs-avg',
              op: 'average',
            }),
          ),
        );
        for (const [a, b] of averaged) {
          assert.deepEqual([...dataOf(a)], [1.5]);
          assert.deepEqual([...dataOf(b)], [3, 3]);
        }
      }),
    );

    test(
      'a group in a process set (set order [3, 1]) next to a world group of the same name',
      bounded(kTestMs, async () => {
        const sets = await addSet(world, [3, 1]);
        const results = await Promise.all(
          world.map(async (rr, rank) => {
            const set = sets[rank] as ProcessSet;
            const inWorld = rr.groupedAllreduce([new Float32Array([rank]), new Int32Array([rank, 1])], { name: 'pg' });
            if (!set.includes(rank)) return { world: await inWorld };
            const [w, reduced, gathered] = await Promise.all([
              inWorld,
              rr.groupedAllreduce([new Float32Array(3).fill(rank * 10), new Int32Array([rank])], { name: 'pg', processSet: set }),
              rr.groupedAllgather(
                [new Int32Array([rank]), { data: new Float32Array(2 * (set.rank() + 1)).fill(rank), shape: [set.rank() + 1, 2] }],
                {
                  name: 'pg-gather',
                  processSet: set,
                },
              ),
            ]);
            return { world: w, reduced, gathered };
          }),
        );
        for (const [rank, r] of results.entries()) {
          assert.deepEqual([dataOf(r.world[0])[0], ...dataOf(r.world[1])], [6, 6, 4], `world group, rank ${rank}`);
          if (!r.reduced || !r.gathered) continue;
          assert.deepEqual([...dataOf(r.reduced[0])], [40, 40, 40], `set group, rank ${rank}`);
          assert.deepEqual([...dataOf(r.reduced[1])], [4]);
          // Set order: job rank 3 first.
          assert.deepEqual([...dataOf(r.gathered[0])], [3, 1]);
          assert.deepEqual([...dataOf(r.gathered[1])], [3, 3, 1, 1, 1, 1]);
        }
        await removeSet(world, sets);
      }),
    );
  });
}

describe('a grouped call pending at shutdown (tcp, 2 ranks)', () => {
  test(
    'rejects with ShutdownError, its members released, after it ran cached once',
    bounded(kTestMs, async () => {
      const world = await startWorld(2);
      try {
        const outs = world.map(() => [new Float32Array(new SharedArrayBuffer(8)), new Int32Array(new SharedArrayBuffer(4))]);
        const call = (rr: RingReduce, rank: number) =>
          rr.groupedAllreduce([new Float32Array([rank, 1]), new Int32Array([rank])], { name: 'ends', outs: outs[rank] });
        for (let it = 0; it < 2; it++) {
          const results = await Promise.all(world.map((rr, rank) => call(rr, rank)));
          for (const [a, b] of results) assert.deepEqual([...dataOf(a), ...dataOf(b)], [1, 2, 1]);
        }
        // Rank 1 never calls it again: rank 0's call waits, until the ranks shut down.
        const pending = call(world[0] as RingReduce, 0);
        await sleep(100);
        const stopping = stopWorld(world);
        await assert.rejects(pending, ShutdownError);
        await stopping;
      } finally {
        await withDeadline(stopWorld(world), 10_000, 'shutdown');
      }
    }),
  );
});
