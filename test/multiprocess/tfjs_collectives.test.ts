/** The tf.Tensor collectives, broadcastObject and broadcastModel, on 3 real ranks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

const kSize = 3;

/** What the fixture's alltoall sends: rank r's splits, and its row i is [10r + i, -(10r + i)]. */
const kSplits = [
  [0, 2, 0],
  [1, 0, 2],
  [3, 1, 0],
];

/** The rows rank `to` receives from the fixture's alltoall, computed from the splits. */
function alltoallExpected(to: number): { shape: number[]; dtype: string; data: number[]; receivedSplits: number[] } {
  const data: number[] = [];
  const receivedSplits: number[] = [];
  kSplits.forEach((splits, from) => {
    const start = splits.slice(0, to).reduce((a, b) => a + b, 0);
    const count = splits[to] as number;
    // 0 - x rather than -x: the report's JSON turns -0 into 0.
    for (let i = start; i < start + count; i++) data.push(10 * from + i, 0 - (10 * from + i));
    receivedSplits.push(count);
  });
  return { shape: [data.length / 2, 2], dtype: 'float32', data, receivedSplits };
}

test('tensor collectives, broadcastObject and broadcastModel agree on every rank', { timeout: 90_000 }, async () => {
  const job = await runJob(kSize, 'dist/test/multiprocess/fixtures/tfjs_collectives_job.js', [], 60_000);
  assert.equal(job.status, 0, describe(job));
  assert.equal(job.reports.size, kSize, describe(job));
  const first = job.reports.get(0) as Record<string, unknown>;
  for (const [rank, r] of job.reports) {
    assert.deepEqual(r.average, { shape: [2, 2], dtype: 'float32', data: [1, 1, 2, 3] }, `rank ${rank}`);
    assert.deepEqual(r.sumInt, { shape: [2], dtype: 'int32', data: [6, 30] });
    assert.deepEqual(r.or, { shape: [3], dtype: 'bool', data: [1, 0, 1] });
    assert.deepEqual(r.and, { shape: [3], dtype: 'bool', data: [0, 0, 1] });
    assert.deepEqual(r.gather, { shape: [6, 2], dtype: 'int32', data: [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2] });
    assert.deepEqual(r.gatherSync, { shape: [3], dtype: 'bool', data: [0, 1, 0] });
    assert.deepEqual(r.bcast, { shape: [2], dtype: 'int32', data: [2, 2] });
    assert.deepEqual(r.bcastSync, { shape: [], dtype: 'float32', data: [0.5] });
    assert.deepEqual(r.object, { hello: 'world', n: [1, 2] });
    assert.deepEqual(r.objectMap, { entries: [['lr', 0.1]], own: rank === kSize - 1 }, `rank ${rank}: the root keeps its value`);
    // reducescatter of 4 rows on 3 ranks: rows 0-1, 2, 3; of 3 rows: one each.
    const averaged = [
      [1, 1, 2, 2],
      [3, 3],
      [4, 4],
    ][rank] as number[];
    assert.deepEqual(r.reducescatter, { shape: [averaged.length / 2, 2], dtype: 'float32', data: averaged }, `rank ${rank}`);
    assert.deepEqual(r.reducescatterSync, { shape: [1], dtype: 'int32', data: [[6, 30, 15][rank]] }, `rank ${rank}`);
    const bySplits = [[], [1, 1], [2, 2, 3, 3, 4, 4]][rank] as number[];
    assert.deepEqual(
      r.reducescatterSplits,
      { shape: [bySplits.length / 2, 2], dtype: 'float32', data: bySplits },
      `rank ${rank}`,
    );
    assert.deepEqual(r.reducescatterScaled, { shape: [1], dtype: 'float32', data: [3] }, `rank ${rank}`);
    assert.equal(r.intAverage, 'InvalidArgumentError');
    assert.deepEqual(r.alltoall, alltoallExpected(rank), `rank ${rank}`);
    assert.deepEqual(
      r.alltoallSync,
      { shape: [3], dtype: 'int32', data: [rank, 10 + rank, 20 + rank], receivedSplits: [1, 1, 1] },
      `rank ${rank}`,
    );
    const gathered = { shape: [6, 2], dtype: 'float32', data: [0.5, 0.5, 1.5, 1.5, 1.5, 1.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5] };
    assert.deepEqual(r.gatherRoot, rank === kSize - 1 ? gathered : null, `rank ${rank}`);
    assert.deepEqual(r.gatherInt, rank === 1 ? { shape: [6], dtype: 'int32', data: [0, 0, 1, 1, 2, 2] } : null, `rank ${rank}`);
    assert.equal(r.leftTensors, 0, `rank ${rank}: tensors left behind by reducescatter, alltoall, gather`);
    assert.equal(r.boolAverage, 'InvalidArgumentError');
    assert.deepEqual(r.modelWeights, first.modelWeights, `rank ${rank} weights`);
    assert.deepEqual(r.optimizerState, first.optimizerState, `rank ${rank} optimizer state`);
    assert.equal(r.iterations, 1);
  }
  const names = (first.optimizerState as { name: string }[]).map((s) => s.name);
  assert.equal(names.length, 1 + 2 * 2, `iter + m and v for kernel and bias: ${names}`);
});
