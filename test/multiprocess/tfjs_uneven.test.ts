/**
 * model.fit on uneven shards (96, 80 and 64 samples on 3 ranks) with JoinCallback: training
 * ends on every rank, the ranks end bit-identical, and with the weights of a one-process
 * reference in which each step averages the gradients of the ranks that still had a batch.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

const kScript = 'dist/test/multiprocess/fixtures/tfjs_uneven_job.js';

interface Report {
  rank: number;
  samples: number;
  weights: number[];
  iterations: number;
  lastJoined: number[];
  history: Record<string, number[]>;
}

function reportsOf(job: Awaited<ReturnType<typeof runJob>>): Report[] {
  const reports = [0, 1, 2].map((rank) => job.reports.get(rank) as unknown as Report | undefined);
  assert.ok(
    reports.every((r) => r !== undefined),
    describe(job),
  );
  return reports as Report[];
}

test('3 ranks with 96, 80 and 64 samples end identical, with the weights of the contributors’ averages', {
  timeout: 90_000,
}, async () => {
  const [job, reference] = await Promise.all([
    runJob(3, kScript, ['--epochs', '3'], 60_000),
    runJob(1, kScript, ['--epochs', '3', '--reference'], 60_000),
  ]);
  assert.equal(job.status, 0, describe(job));
  assert.equal(reference.status, 0, describe(reference));
  const [r0, r1, r2] = reportsOf(job) as [Report, Report, Report];
  assert.deepEqual(
    [r0, r1, r2].map((r) => r.samples),
    [96, 80, 64],
  );
  assert.deepEqual(r1.weights, r0.weights, 'rank 1 ends with rank 0’s weights');
  assert.deepEqual(r2.weights, r0.weights, 'rank 2 ends with rank 0’s weights');
  assert.deepEqual(r1.history, r0.history, 'averaged metrics agree');
  for (const r of [r0, r1, r2]) {
    assert.deepEqual(r.lastJoined, [0, 0, 0], 'rank 0, with the most batches, joins last every epoch');
    assert.equal(r.iterations, 18, 'every rank has the optimizer state of 3 epochs of 6 steps');
  }
  const expected = (reference.reports.get(0) as unknown as { weights: number[] }).weights;
  let worst = 0;
  expected.forEach((w, i) => {
    worst = Math.max(worst, Math.abs(w - (r0.weights[i] as number)));
  });
  assert.ok(worst < 1e-6, `largest difference from the reference: ${worst}`);
});

test('uneven shards with backwardPassesPerStep 2 end identical too', { timeout: 90_000 }, async () => {
  const job = await runJob(3, kScript, ['--epochs', '2', '--passes', '2'], 60_000);
  assert.equal(job.status, 0, describe(job));
  const [r0, r1, r2] = reportsOf(job) as [Report, Report, Report];
  assert.deepEqual(r1.weights, r0.weights);
  assert.deepEqual(r2.weights, r0.weights);
  // Rank 0's 6 calls per epoch make 3 updates: 6 in 2 epochs.
  for (const r of [r0, r1, r2]) assert.equal(r.iterations, 6);
});
