/**
 * Parity: K steps on 2 ranks with batch B each give the weights of K steps on 1 rank with
 * batch 2B over the same data, from the same (broadcast) start — through the synchronous
 * path (model.fit's) and the asynchronous one (custom loops').
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

const kScript = 'dist/test/multiprocess/fixtures/tfjs_parity_job.js';
const kArgs = ['--steps', '12', '--global-batch', '32'];
// Averaging two half-batch gradients sums in another order than one full batch: a few ulps
// per step, nothing more.
const kTolerance = 1e-6;

interface Report {
  rank: number;
  weights: number[];
  iterations: number;
  tensors: number;
}

for (const mode of ['sync', 'async']) {
  test(`2 ranks × batch 16 match 1 rank × batch 32 (${mode} step)`, { timeout: 90_000 }, async () => {
    const [one, two] = await Promise.all([
      runJob(1, kScript, [...kArgs, '--mode', mode], 60_000),
      runJob(2, kScript, [...kArgs, '--mode', mode], 60_000),
    ]);
    assert.equal(one.status, 0, describe(one));
    assert.equal(two.status, 0, describe(two));
    const reference = one.reports.get(0) as unknown as Report;
    const [r0, r1] = [two.reports.get(0), two.reports.get(1)] as unknown as [Report, Report];
    assert.ok(reference && r0 && r1, describe(two));
    assert.deepEqual(r1.weights, r0.weights, 'both ranks hold bit-identical weights');
    assert.equal(r0.iterations, 12);
    let worst = 0;
    reference.weights.forEach((w, i) => {
      worst = Math.max(worst, Math.abs(w - (r0.weights[i] as number)));
    });
    assert.ok(worst < kTolerance, `largest difference from the 1-rank run: ${worst}`);
    assert.equal(r0.tensors, reference.tensors, 'the distributed step leaks no tensor');
  });
}
