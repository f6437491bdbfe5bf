/**
 * backwardPassesPerStep inside model.fit on 2 ranks: steps of 2 batches of 8 give the weights of
 * steps of one batch of 16 over the same samples, and the accumulation makes no tensor.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

const kScript = 'dist/test/multiprocess/fixtures/tfjs_accumulate_job.js';
// Two half-batch means summed and halved round differently from one full-batch mean: a few
// ulps per step.
const kTolerance = 1e-6;

interface Report {
  rank: number;
  weights: number[];
  iterations: number;
  /** Live tensors after each batch. */
  tensors: number[];
}

/** The distinct tensor counts of each epoch, in order. */
function perEpoch(tensors: number[], batchesPerEpoch: number): number[][] {
  const epochs: number[][] = [];
  for (let i = 0; i < tensors.length; i += batchesPerEpoch) epochs.push([...new Set(tensors.slice(i, i + batchesPerEpoch))]);
  return epochs;
}

test('model.fit with backwardPassesPerStep 2 × batch 8 matches backwardPassesPerStep 1 × batch 16', {
  timeout: 90_000,
}, async () => {
  const [accumulated, whole] = await Promise.all([
    runJob(2, kScript, ['--passes', '2', '--batch', '8', '--epochs', '2'], 60_000),
    runJob(2, kScript, ['--passes', '1', '--batch', '16', '--epochs', '2'], 60_000),
  ]);
  assert.equal(accumulated.status, 0, describe(accumulated));
  assert.equal(whole.status, 0, describe(whole));
  const [a0, a1] = [accumulated.reports.get(0), accumulated.reports.get(1)] as unknown as [Report, Report];
  const reference = whole.reports.get(0) as unknown as Report;
  assert.ok(a0 && a1 && reference, describe(accumulated));
  assert.deepEqual(a1.weights, a0.weights, 'both ranks hold bit-identical weights');
  // 64 samples per rank and 2 epochs: 8 updates either way.
  assert.equal(a0.iterations, 8);
  assert.equal(reference.iterations, 8);
  let worst = 0;
  reference.weights.forEach((w, i) => {
    worst = Math.max(worst, Math.abs(w - (a0.weights[i] as number)));
  });
  assert.ok(worst < kTolerance, `largest difference from batch 16: ${worst}`);
  // model.fit itself keeps one tensor more per epoch; within an epoch the count is flat, and the
  // same as without accumulation.
  const counts = perEpoch(a0.tensors, 8);
  assert.ok(
    counts.every((c) => c.length === 1),
    `tensor count varies within an epoch: ${a0.tensors.join(' ')}`,
  );
  assert.deepEqual(counts, perEpoch(reference.tensors, 4));
});
