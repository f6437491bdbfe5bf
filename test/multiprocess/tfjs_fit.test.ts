/**
 * model.fit with DistributedOptimizer and the callbacks on 2 ranks: both ranks end with
 * identical weights, see identical (averaged) metrics, and the learning rate warms up to its
 * target.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

interface Report {
  rank: number;
  size: number;
  target: number;
  weights: number[];
  history: Record<string, number[]>;
  learningRates: number[];
  iterations: number;
}

test('model.fit on 2 ranks ends with identical weights and averaged metrics', { timeout: 90_000 }, async () => {
  const job = await runJob(2, 'dist/test/multiprocess/fixtures/tfjs_fit_job.js', [], 60_000);
  assert.equal(job.status, 0, describe(job));
  const [r0, r1] = [job.reports.get(0), job.reports.get(1)] as unknown as [Report, Report];
  assert.ok(r0 && r1, describe(job));
  assert.deepEqual(r1.weights, r0.weights, 'weights differ between ranks');
  assert.deepEqual(r1.history, r0.history, 'averaged metrics differ between ranks');
  assert.deepEqual(Object.keys(r0.history).sort(), ['acc', 'loss', 'val_acc', 'val_loss']);
  assert.equal(r0.history.loss?.length, 4);
  // 120 samples per rank, 90 for training after validationSplit: 6 steps of 16 per epoch.
  assert.equal(r0.iterations, 4 * 6);
  const lrs = r0.learningRates;
  assert.ok(Math.abs((lrs[0] as number) - r0.target / 2) < 1e-9, `first rate ${lrs[0]} is not target/size`);
  assert.ok(
    lrs.every((lr, i) => i === 0 || lr >= (lrs[i - 1] as number)),
    'the rate only grows',
  );
  assert.equal(lrs.at(-1), r0.target);
});

test("model.fit with compression 'fp16' trains like float32: identical weights on both ranks, a loss as low", {
  timeout: 150_000,
}, async () => {
  // Seeded and unshuffled, the two runs differ only by the gradients' rounding to fp16.
  const [plain, half] = [
    await runJob(2, 'dist/test/multiprocess/fixtures/tfjs_fit_job.js', ['seeded'], 60_000),
    await runJob(2, 'dist/test/multiprocess/fixtures/tfjs_fit_job.js', ['seeded', 'fp16'], 60_000),
  ];
  for (const job of [plain, half]) assert.equal(job.status, 0, describe(job));
  const [h0, h1] = [half.reports.get(0), half.reports.get(1)] as unknown as [Report, Report];
  assert.ok(h0 && h1, describe(half));
  assert.deepEqual(h1.weights, h0.weights, 'weights differ between ranks');
  const p0 = plain.reports.get(0) as unknown as Report;
  const [first, last] = [(r: Report) => r.history.loss?.[0] as number, (r: Report) => r.history.loss?.at(-1) as number];
  // The first epoch's mean loss already holds some rounded steps: equal to about 1e-6, not exactly.
  assert.ok(Math.abs(first(h0) - first(p0)) < 1e-4 * first(p0), `first epochs ${first(h0)} and ${first(p0)}: not the same start`);
  assert.ok(last(h0) < 0.6 * first(h0), `the loss fell only from ${first(h0)} to ${last(h0)}`);
  assert.ok(
    Math.abs(last(h0) - last(p0)) < 1e-3 * last(p0),
    `the last epoch's loss is ${last(h0)} with fp16, ${last(p0)} without`,
  );
});
