/**
 * The response cache: ids are assigned identically from the response stream, a changed request
 * is never answered from the cache, and in the engine a training loop's steady state sends ids
 * instead of full requests (fewer control bytes) with correct results.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GroupArrivals } from '../../src/engine/negotiation/group_arrivals.js';
import { ResponseCache } from '../../src/engine/negotiation/response_cache.js';
import type { Request } from '../../src/engine/wire/messages.js';
import { allreduceRequest, startEngines, stopEngines } from '../helpers/engines.js';

/** Member `index` of group `group` of `size` members, of `length` elements. */
function member(group: string, size: number, index: number, length = 4): Request {
  return { ...allreduceRequest(`${group}/${index}`, length), group: { name: group, size, index } };
}

describe('ResponseCache, grouped calls', () => {
  it('learns a whole group as one id, which each member (the same parameters, a fresh group object) finds', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 1)]);
    const members = [member('g', 2, 1), member('g', 2, 0)];
    cache.learnGroup(members);
    assert.equal(cache.idOf(member('g', 2, 0)), 1);
    assert.equal(cache.idOf(member('g', 2, 1)), 1);
    assert.equal(cache.request(1), undefined, 'a group has no single request');
    assert.deepEqual(
      cache.group(1)?.members.map((m) => m.name),
      ['g/1', 'g/0'],
      'in the order they ran',
    );
    assert.equal(cache.idOf(member('g', 2, 0, 5)), undefined, 'another shape');
    assert.equal(cache.idOf(member('g', 3, 0)), undefined, 'another group size');
    assert.ok(cache.holds(member('g', 2, 1)));
    assert.equal(cache.idsFor({ kind: 'execute', names: ['g/1', 'g/0'], request: member('g', 2, 1), counts: [] }), undefined);
  });

  it('does not learn an incomplete or unnamed group, and evicts a group with all its names', () => {
    const cache = new ResponseCache(10);
    cache.learnGroup([member('g', 3, 0), member('g', 3, 1)]);
    cache.learnGroup([member('groupedAllreduce #4', 1, 0)]);
    assert.equal(cache.size, 0);
    cache.learnGroup([member('g', 2, 0), member('g', 2, 1)]);
    cache.evict(0);
    assert.equal(cache.idOfName('g/0'), undefined);
    assert.equal(cache.idOfName('g/1'), undefined);
    assert.equal(cache.group(0), undefined);
    cache.learnGroup([member('g', 2, 0), member('g', 2, 1)]);
    assert.equal(cache.idOf(member('g', 2, 1)), 1, 'learned again under a new id');
  });
});

describe('GroupArrivals', () => {
  it('completes a group once every member arrived (a member twice counts once), then starts over', () => {
    const arrivals = new GroupArrivals();
    assert.equal(arrivals.arrive(7, member('g', 3, 0)), false);
    assert.equal(arrivals.arrive(7, member('g', 3, 0)), false);
    assert.equal(arrivals.arrive(7, member('g', 3, 2)), false);
    assert.equal(arrivals.arrive(7, member('g', 3, 1)), true);
    assert.deepEqual(arrivals.take(7), [], 'nothing waits after a complete group');
    arrivals.arrive(7, member('g', 3, 1));
    arrivals.arrive(8, member('h', 2, 0));
    assert.deepEqual(
      arrivals.takeAll().map((r) => r.name),
      ['g/1', 'h/0'],
    );
    assert.deepEqual(arrivals.takeAll(), []);
  });
});

describe('ResponseCache', () => {
  it('hands out ids in learning order and rebuilds responses from them', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 4), allreduceRequest('b', 8)]);
    assert.equal(cache.idOf(allreduceRequest('b', 8)), 1);
    const response = cache.expand([1, 0]);
    assert.deepEqual(response?.names, ['b', 'a']);
    assert.equal(response?.request.op, 'allreduce');
  });

  it('misses when any parameter changed, and never reassigns an id', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 4)]);
    assert.equal(cache.idOf(allreduceRequest('a', 5)), undefined);
    assert.equal(cache.idOf({ ...allreduceRequest('a', 4), reduceOp: 'max' }), undefined);
    cache.learn([allreduceRequest('a', 5)]);
    assert.equal(cache.idOf(allreduceRequest('a', 4)), 0);
    assert.equal(cache.size, 1);
  });

  it('stops caching at capacity, does not cache allgather, and rejects unknown ids', () => {
    const cache = new ResponseCache(1);
    const gather: Request = { name: 'g', op: 'allgather', dtype: 'float32', shape: [2, 3] };
    cache.learn([gather, allreduceRequest('a', 4), allreduceRequest('b', 4)]);
    assert.equal(cache.size, 1);
    assert.equal(cache.idOf(allreduceRequest('b', 4)), undefined);
    assert.equal(cache.expand([5]), undefined);
  });

  it('answers a response from the cache only when its parameters match', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 4)]);
    const response = { kind: 'execute' as const, names: ['a'], request: allreduceRequest('a', 4), counts: [] };
    assert.deepEqual(cache.idsFor(response), [0]);
    assert.equal(cache.idsFor({ ...response, request: { ...response.request, reduceOp: 'min' } }), undefined);
    assert.equal(cache.idsFor({ ...response, names: ['a', 'zz'] }), undefined);
  });
});

describe('response cache in the engine', () => {
  async function steps(cacheCapacity: number) {
    const ranks = startEngines(2, { cacheCapacity, fusionThresholdBytes: 0 });
    const bytesPerStep: number[] = [];
    const decisionsAfterStep: number[] = [];
    for (let step = 0; step < 3; step++) {
      const before = ranks[1]?.control.bytes ?? 0;
      const buffers = ranks.map((_, rank) =>
        // Above the eager size (64 KiB on 2 ranks: eager_exchange.ts), so that the reports carry
        // ready bits only.
        Array.from({ length: 20 }, (_, i) => new Float32Array(new SharedArrayBuffer(4 * (16400 + i))).fill(rank + step)),
      );
      await Promise.all(
        ranks.map((r, rank) =>
          Promise.all(buffers[rank]?.map((b, i) => r.submit(allreduceRequest(`layer${i}/weights/gradient`, b.length), b)) ?? []),
        ),
      );
      for (const list of buffers) for (const b of list) assert.ok(b.every((v) => v === 1 + 2 * step));
      bytesPerStep.push((ranks[1]?.control.bytes ?? 0) - before);
      decisionsAfterStep.push(ranks[1]?.engine.negotiation.decisions ?? 0);
    }
    const hits = ranks.map((r) => ({ ...r.engine.cacheHits }));
    const negotiation = ranks.map((r) => ({ ...r.engine.negotiation }));
    await stopEngines(ranks);
    return { bytesPerStep, hits, negotiation, decisionsAfterStep };
  }

  it('after the first step, ranks agree in ready rounds without rank 0, on a few bytes', async () => {
    const { bytesPerStep, hits, negotiation, decisionsAfterStep } = await steps(1024);
    assert.ok((bytesPerStep[1] as number) * 10 < (bytesPerStep[0] as number), `control bytes per step ${bytesPerStep}`);
    assert.equal(bytesPerStep[1], bytesPerStep[2]);
    assert.equal(hits[1]?.requests, 40, 'rank 1 found every request of steps 2 and 3 in its cache');
    assert.equal(decisionsAfterStep[1], decisionsAfterStep[0], 'no decision of rank 0 after step 1');
    assert.equal(decisionsAfterStep[2], decisionsAfterStep[0]);
    for (const n of negotiation) assert.equal(n.agreedInRounds, 40, 'steps 2 and 3 were agreed in ready rounds');
  });

  it('small cached allreduces finish from the eager buffers, with the same bits on every rank', async () => {
    const ranks = startEngines(3, { fusionThresholdBytes: 0 });
    const ops = ['sum', 'average', 'max', 'product'] as const;
    const values = (rank: number, step: number, i: number) =>
      Float64Array.from({ length: 5 + i }, (_, k) => Math.sin(rank * 7.1 + step * 3.3 + k) * 10 ** (rank - 1));
    for (let step = 0; step < 3; step++) {
      const executedBefore = ranks.map((r) => r.engine.executionCounts.executions);
      const outs = ranks.map((_, rank) => ops.map((_, i) => Float64Array.from(values(rank, step, i))));
      const int64 = ranks.map((_, rank) => BigInt64Array.from([2n ** 62n + BigInt(rank), -BigInt(rank + step)]));
      await Promise.all(
        ranks.map((r, rank) =>
          Promise.all([
            ...ops.map((op, i) =>
              r.submit({ ...allreduceRequest(`eager/${op}`, 5 + i), dtype: 'float64', reduceOp: op }, outs[rank]?.[i]),
            ),
            r.submit({ ...allreduceRequest('eager/int64', 2), dtype: 'int64' }, int64[rank]),
          ]),
        ),
      );
      for (const [i, op] of ops.entries()) {
        const per = ranks.map((_, rank) => values(rank, step, i));
        const fold = (k: number) => {
          let acc = per[0]?.[k] as number;
          for (let r = 1; r < 3; r++) {
            const v = per[r]?.[k] as number;
            acc = op === 'max' ? Math.max(acc, v) : op === 'product' ? acc * v : acc + v;
          }
          return op === 'average' ? acc / 3 : acc;
        };
        for (const rank of [0, 1, 2]) {
          const out = outs[rank]?.[i] as Float64Array;
          assert.deepEqual(
            [...out],
            Array.from({ length: out.length }, (_, k) => fold(k)),
            `step ${step} ${op} rank ${rank}`,
          );
        }
      }
      const wrapped = BigInt.asIntN(64, 3n * 2n ** 62n + 3n);
      for (const out of int64) assert.deepEqual([...out], [wrapped, -BigInt(3 + 3 * step)]);
      const executed = ranks.map((r, rank) => r.engine.executionCounts.executions - (executedBefore[rank] as number));
      // Step 0 negotiates through rank 0 and runs the algorithms; then the cache takes over.
      if (step > 0) assert.deepEqual(executed, [0, 0, 0], `step ${step}: no algorithm ran`);
    }
    await stopEngines(ranks);
  });

  it('with the cache disabled every step costs the same and goes through rank 0', async () => {
    const { bytesPerStep, hits, negotiation } = await steps(0);
    assert.equal(bytesPerStep[0], bytesPerStep[1]);
    assert.equal(hits[1]?.requests, 0);
    for (const n of negotiation) assert.equal(n.rounds, 0);
  });
});
