/**
 * monitoredBarrier (api/ops/monitored_barrier.ts) and the deadlines it is made of (option
 * 'timeoutMs' of send and recv), on 4 ranks over the memory world: every rank arrives; a rank
 * missing is named by rank 0 and every rank that arrived with the same TimeoutError, after about
 * `timeoutMs`; `waitAll` names every missing rank, without it the first; a late rank fails on its
 * own deadline; the job goes on after each; argument errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import { InvalidArgumentError, TimeoutError } from '../../src/core/errors.js';
import { startMemoryWorld } from '../helpers/local_engine.js';
import { bounded, sleep } from '../helpers/real_worlds.js';
import { stopWorld } from '../helpers/world.js';

const kSize = 4;
const kTimeoutMs = 120;
const kTestMs = 10_000;

/** Each rank's outcome: undefined when it resolved, else its error's message. */
async function outcomes(calls: readonly Promise<unknown>[]): Promise<(string | undefined)[]> {
  const settled = await Promise.allSettled(calls);
  return settled.map((s) => {
    if (s.status === 'fulfilled') return undefined;
    assert.ok(s.reason instanceof TimeoutError, `a TimeoutError, not ${String(s.reason)}`);
    return (s.reason as TimeoutError).message;
  });
}

describe(`monitoredBarrier, memory, ${kSize} ranks`, () => {
  let world: RingReduce[] = [];
  before(() => {
    world = startMemoryWorld(kSize, { stallTimeoutMs: 5000 });
  });
  after(async () => {
    await stopWorld(world);
  });

  /** Every rank's monitored barrier, ranks in `late` entering once the others have settled. */
  async function withLate(late: readonly number[], options: { timeoutMs: number; waitAll?: boolean }) {
    const started = performance.now();
    const onTime = world.map((rr, rank) => (late.includes(rank) ? undefined : rr.monitoredBarrier(options)));
    const early = await outcomes(onTime.filter((p): p is Promise<void> => p !== undefined));
    const took = performance.now() - started;
    const tardy = await outcomes(late.map((rank) => (world[rank] as RingReduce).monitoredBarrier(options)));
    return { early, tardy, took };
  }

  test(
    'every rank arrives: it resolves on every rank, call after call (each with a tag of its own)',
    bounded(kTestMs, async () => {
      for (let i = 0; i < 3; i++) {
        assert.deepEqual(await outcomes(world.map((rr) => rr.monitoredBarrier({ timeoutMs: 2000 }))), [
          undefined,
          undefined,
          undefined,
          undefined,
        ]);
      }
      // Rank 0 last: the others' arrivals wait for it.
      const calls = world.slice(1).map((rr) => rr.monitoredBarrier({ timeoutMs: 2000 }));
      await sleep(50);
      calls.push((world[0] as RingReduce).monitoredBarrier({ timeoutMs: 2000 }));
      assert.deepEqual(await outcomes(calls), [undefined, undefined, undefined, undefined]);
    }),
  );

  test(
    'rank 3 missing: ranks 0, 1 and 2 reject with the same TimeoutError naming it after about timeoutMs; rank 3, late, fails on its own deadline; the job goes on',
    bounded(kTestMs, async () => {
      const { early, tardy, took } = await withLate([3], { timeoutMs: kTimeoutMs });
      const named = `monitoredBarrier: rank 3 did not arrive within ${kTimeoutMs} ms`;
      assert.deepEqual(early, [named, named, named]);
      assert.ok(took >= kTimeoutMs - 20 && took < kTimeoutMs + 1500, `rank 0 gave up after ${took.toFixed(0)} ms`);
      assert.deepEqual(tardy, [
        `monitoredBarrier: rank 0 did not take rank 3's arrival within ${kTimeoutMs} ms (it had stopped waiting for this rank, or has not arrived)`,
      ]);
      await Promise.all(world.map((rr) => rr.barrier({ name: 'after-missing' })));
      assert.deepEqual(await outcomes(world.map((rr) => rr.monitoredBarrier({ timeoutMs: 2000 }))), [
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
    }),
  );

  test(
    'ranks 2 and 3 missing: waitAll names both, without it the first; every rank that arrived says the same',
    bounded(kTestMs, async () => {
      const all = await withLate([2, 3], { timeoutMs: kTimeoutMs, waitAll: true });
      const both = `monitoredBarrier: ranks 2, 3 did not arrive within ${kTimeoutMs} ms`;
      assert.deepEqual(all.early, [both, both]);
      assert.equal(all.tardy.length, 2);
      const first = await withLate([2, 3], { timeoutMs: kTimeoutMs });
      const one = `monitoredBarrier: rank 2 did not arrive within ${kTimeoutMs} ms`;
      assert.deepEqual(first.early, [one, one]);
      assert.ok(
        first.tardy.every((m) => m?.includes('did not take rank') === true),
        `late ranks fail on their own deadline: ${first.tardy.join('; ')}`,
      );
      assert.deepEqual(await outcomes(world.map((rr) => rr.monitoredBarrier({ timeoutMs: 2000, waitAll: true }))), [
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
    }),
  );

  test(
    "send and recv with option 'timeoutMs': a TimeoutError naming the peer after it, and later messages still match",
    bounded(kTestMs, async () => {
      const [rr0, rr1] = world as [RingReduce, RingReduce];
      await assert.rejects(
        rr0.recv(new Float32Array(2), { from: 1, tag: 5, timeoutMs: 100 }),
        (e) =>
          e instanceof TimeoutError && e.message === 'recv of 2 float32 from rank 1 (tag 5): rank 1 sent nothing within 100 ms',
      );
      await assert.rejects(
        rr1.send(new Float32Array(2), { to: 0, tag: 6, timeoutMs: 100 }),
        (e) =>
          e instanceof TimeoutError &&
          e.message === 'send of 2 float32 to rank 0 (tag 6): rank 0 posted no matching recv within 100 ms',
      );
      // Neither left anything behind: the next message of each tag meets the next call.
      for (const tag of [5, 6]) {
        const [, got] = await Promise.all([
          rr1.send(Float32Array.of(tag, 1), { to: 0, tag }),
          rr0.recv(new Float32Array(2), { from: 1, tag, timeoutMs: 2000 }),
        ]);
        assert.deepEqual([...got], [tag, 1]);
      }
    }),
  );

  test(
    'argument errors: InvalidArgumentError at the call, and the calls that follow still line up',
    bounded(kTestMs, async () => {
      const rr0 = world[0] as RingReduce;
      const refused: [unknown, RegExp][] = [
        [{ timeoutMs: -1 }, /option 'timeoutMs' must be a number of ms in \(0, 2\^31\), got -1/],
        [{ timeoutMs: 0 }, /option 'timeoutMs' must be a number of ms/],
        [{ timeoutMs: '5' }, /option 'timeoutMs' must be a number of ms/],
        [{ waitAll: 'yes' }, /option 'waitAll' must be a boolean, got "yes"/],
        [{ processSet: undefined, name: 'x' }, /unknown option 'processSet' \(allowed: timeoutMs, waitAll\)/],
      ];
      for (const [options, pattern] of refused) {
        await assert.rejects(
          rr0.monitoredBarrier(options as never),
          (e) => e instanceof InvalidArgumentError && pattern.test(e.message),
          JSON.stringify(options),
        );
      }
      await assert.rejects(rr0.recv(new Int8Array(1), { from: 1, timeoutMs: Number.NaN }), /option 'timeoutMs'/);
      assert.deepEqual(await outcomes(world.map((rr) => rr.monitoredBarrier({ timeoutMs: 2000 }))), [
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
    }),
  );
});
