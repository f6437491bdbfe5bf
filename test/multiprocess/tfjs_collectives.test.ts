/** The tf.Tensor collectives, broadcastObject and broadcastModel, on 3 real ranks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

const kSize = 3;

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
    assert.equal(r.boolAverage, 'InvalidArgumentError');
    assert.deepEqual(r.modelWeights, first.modelWeights, `rank ${rank} weights`);
    assert.deepEqual(r.optimizerState, first.optimizerState, `rank ${rank} optimizer state`);
    assert.equal(r.iterations, 1);
  }
  const names = (first.optimizerState as { name: string }[]).map((s) => s.name);
  assert.equal(names.length, 1 + 2 * 2, `iter + m and v for kernel and bias: ${names}`);
});
