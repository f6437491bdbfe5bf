/**
 * Tensor fusion: the planner merges what it may and nothing else, and the engine really runs
 * many small allreduces submitted together as few executions, with correct results.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DType } from '../../src/core/types.js';
import { planFusion } from '../../src/engine/execution/fusion.js';
import { splitByOwnMemory } from '../../src/engine/ops/allreduce.js';
import { pack, unpack } from '../../src/engine/ops/packing.js';
import type { Request, Response } from '../../src/engine/wire/messages.js';
import { allreduceRequest, startEngines, stopEngines } from '../helpers/engines.js';

function exec(name: string, dtype: DType = 'float32', op: 'allreduce' | 'broadcast' = 'allreduce'): Response {
  const request: Request =
    op === 'broadcast' ? { name, op, dtype, shape: [1], root: 0 } : { name, op, dtype, shape: [1], reduceOp: 'sum' };
  return { kind: 'execute', names: [name], request, counts: [] };
}

describe('planFusion', () => {
  const elements = (name: string) => Number(name.slice(1));

  it('merges consecutive allreduces of one dtype and op up to the threshold', () => {
    const plan = planFusion([exec('a10'), exec('b10'), exec('c10'), exec('d10')], elements, 80);
    assert.deepEqual(
      plan.map((r) => r.names),
      [
        ['a10', 'b10'],
        ['c10', 'd10'],
      ],
    );
  });

  it('keeps apart other dtypes, other ops, errors and tensors above the threshold', () => {
    const error: Response = { kind: 'error', names: ['e1'], errorKind: 'MismatchError', message: 'x' };
    const plan = planFusion(
      [
        exec('a1'),
        exec('b1', 'float64'),
        exec('c1', 'float64'),
        exec('d1', 'float32', 'broadcast'),
        error,
        exec('f99'),
        exec('g1'),
      ],
      elements,
      64,
    );
    assert.deepEqual(
      plan.map((r) => r.names),
      [['a1'], ['b1', 'c1'], ['d1'], ['e1'], ['f99'], ['g1']],
    );
  });

  it('a threshold of 0 disables fusion', () => {
    assert.equal(planFusion([exec('a1'), exec('b1')], elements, 0).length, 2);
  });

  it('pack and unpack are inverse copies', () => {
    const parts = [Float32Array.of(1, 2), Float32Array.of(3), Float32Array.of(4, 5, 6)];
    const fused = new Float32Array(6);
    pack(parts, fused);
    assert.deepEqual([...fused], [1, 2, 3, 4, 5, 6]);
    fused.set([6, 5, 4, 3, 2, 1]);
    unpack(fused, parts);
    assert.deepEqual(
      parts.map((p) => [...p]),
      [[6, 5], [4], [3, 2, 1]],
    );
  });

  it('splitByOwnMemory: the large tensors in their own memory, in order; the small ones packed unless alone', () => {
    const [s1, big1, s2, big2] = [new Float32Array(3), new Float32Array(16), new Float32Array(15), new Float64Array(9)];
    const both = splitByOwnMemory([s1, big1, s2, big2], 64);
    assert.deepEqual(both.packed, [s1, s2]);
    assert.deepEqual(both.own, [big1, big2]);
    // One small tensor needs no packing: it goes as it is, in its place.
    const lone = splitByOwnMemory([big1, s1, big2], 64);
    assert.deepEqual(lone.packed, []);
    assert.deepEqual(lone.own, [big1, s1, big2]);
    const none = splitByOwnMemory([s1, s2], 64);
    assert.deepEqual(none, { packed: [s1, s2], own: [] });
  });
});

describe('fusion in the engine', () => {
  async function run(fusionThresholdBytes: number) {
    const ranks = startEngines(2, { fusionThresholdBytes });
    const inputs = ranks.map((_, rank) =>
      Array.from({ length: 100 }, (_, i) => Float32Array.from({ length: 10 + i }, () => rank + i)),
    );
    const buffers = inputs.map((list) => list.map((a) => new Float32Array(new SharedArrayBuffer(a.byteLength)).fill(0)));
    for (const [rank, list] of buffers.entries()) for (const [i, b] of list.entries()) b.set(inputs[rank]?.[i] as Float32Array);
    const results = await Promise.all(
      ranks.map((r, rank) => Promise.all(buffers[rank]?.map((b, i) => r.submit(allreduceRequest(`t${i}`, b.length), b)) ?? [])),
    );
    for (const list of results) for (const m of list) assert.equal(m.type, 'done');
    for (const list of buffers)
      for (const [i, b] of list.entries())
        assert.ok(
          b.every((v) => v === 1 + 2 * i),
          `tensor t${i}`,
        );
    const counts = ranks.map((r) => ({ ...r.engine.executionCounts }));
    await stopEngines(ranks);
    return counts;
  }

  it('runs 100 small allreduces submitted together as a handful of fused executions', async () => {
    const counts = await run(1024 * 1024);
    for (const c of counts) {
      assert.ok(c.executions < 10, `executions ${c.executions}`);
      assert.ok(c.fused >= 1, 'at least one fused execution');
    }
  });

  it('runs them one by one with fusion disabled', async () => {
    for (const c of await run(0)) assert.deepEqual(c, { executions: 100, fused: 0 });
  });
});
