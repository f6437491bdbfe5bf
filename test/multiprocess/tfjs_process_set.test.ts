/**
 * Process sets in model.fit on 4 ranks: sets {0, 1} and {2, 3} each train their own model with
 * DistributedOptimizer({ processSet }) and the callbacks given the set. Each set ends with one
 * model on both its ranks, the two sets with different ones; set {2, 3} has uneven shards and
 * joins within the set.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

interface Report {
  rank: number;
  set: number;
  samples: number;
  weights: number[];
  history: Record<string, number[]>;
  lastJoined: number;
  iterations: number;
}

test('two process sets of 2 ranks train two models, identical within each set', { timeout: 90_000 }, async () => {
  const job = await runJob(4, 'dist/test/multiprocess/fixtures/tfjs_process_set_job.js', [], 60_000);
  assert.equal(job.status, 0, describe(job));
  const reports = [0, 1, 2, 3].map((rank) => job.reports.get(rank) as unknown as Report);
  assert.ok(
    reports.every((r) => r !== undefined),
    describe(job),
  );
  const [r0, r1, r2, r3] = reports as [Report, Report, Report, Report];
  assert.deepEqual(
    reports.map((r) => [r.set, r.samples]),
    [
      [0, 48],
      [0, 48],
      [1, 41],
      [1, 40],
    ],
  );
  assert.deepEqual(r1.weights, r0.weights, 'set {0, 1} holds one model');
  assert.deepEqual(r3.weights, r2.weights, 'set {2, 3} holds one model');
  assert.notDeepEqual(r2.weights, r0.weights, 'the sets train different models');
  assert.deepEqual(r1.history, r0.history, 'metrics are averaged within set {0, 1}');
  assert.deepEqual(r3.history, r2.history, 'metrics are averaged within set {2, 3}');
  assert.notDeepEqual(r2.history, r0.history);
  // In set {2, 3}, job rank 2 (rank 0 of the set) has the extra batch and joins last.
  assert.equal(r2.lastJoined, 0);
  assert.equal(r3.lastJoined, 0);
  for (const r of reports) assert.equal(r.iterations, 18, '3 epochs of 6 steps');
});
