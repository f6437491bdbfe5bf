/**
 * The response cache: ids are assigned identically from the response stream, a changed request
 * is never answered from the cache, and in the engine a training loop's steady state sends ids
 * instead of full requests (fewer control bytes) with correct results.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Request } from '../../src/engine/messages.js';
import { ResponseCache } from '../../src/engine/response_cache.js';
import { allreduceRequest, startEngines, stopEngines } from '../helpers/engines.js';

describe('ResponseCache', () => {
  it('hands out ids in learning order and rebuilds responses from them', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 4), allreduceRequest('b', 8)]);
    assert.equal(cache.idOf(allreduceRequest('b', 8)), 1);
    const response = cache.expand([1, 0]);
    assert.deepEqual(response?.names, ['b', 'a']);
    assert.equal(response?.op, 'allreduce');
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
    const gather: Request = { name: 'g', op: 'allgather', dtype: 'float32', shape: [2, 3], reduceOp: 'sum', root: -1 };
    cache.learn([gather, allreduceRequest('a', 4), allreduceRequest('b', 4)]);
    assert.equal(cache.size, 1);
    assert.equal(cache.idOf(allreduceRequest('b', 4)), undefined);
    assert.equal(cache.expand([5]), undefined);
  });

  it('answers a response from the cache only when its parameters match', () => {
    const cache = new ResponseCache(10);
    cache.learn([allreduceRequest('a', 4)]);
    const response = {
      kind: 'execute' as const,
      names: ['a'],
      op: 'allreduce' as const,
      dtype: 'float32' as const,
      reduceOp: 'sum' as const,
      root: -1,
      firstDims: [],
    };
    assert.deepEqual(cache.idsFor(response), [0]);
    assert.equal(cache.idsFor({ ...response, reduceOp: 'min' }), undefined);
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
        Array.from({ length: 20 }, (_, i) => new Float32Array(new SharedArrayBuffer(16 + 4 * i)).fill(rank + step)),
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

  it('with the cache disabled every step costs the same and goes through rank 0', async () => {
    const { bytesPerStep, hits, negotiation } = await steps(0);
    assert.equal(bytesPerStep[0], bytesPerStep[1]);
    assert.equal(hits[1]?.requests, 0);
    for (const n of negotiation) assert.equal(n.rounds, 0);
  });
});
