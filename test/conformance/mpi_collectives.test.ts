/**
 * The conformance checks on the MPI backend: every rank a real process of an MPI job
 * (mpirun -np 2 and 3), all communication through the native addon (fixture:
 * test/multiprocess/fixtures/mpi_conformance_job.ts). Skipped, with the reason, where the addon
 * is not built or mpirun is missing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';

const skip = mpiSkipReason();

for (const np of [2, 3]) {
  test(`MPI backend, ${np} ranks: allreduce (every dtype and op; 0, 1, N±1, 1000, 2^20 elements), allgather, broadcast, mismatches, named tensors`, {
    skip,
  }, async () => {
    const run = await mpirun(np, 'mpi_conformance_job', { timeoutMs: 240_000 });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.reports.length, np, describeRun(run));
    for (const report of run.reports) {
      assert.deepEqual(report.failures, [], `rank ${report.rank}: ${JSON.stringify(report.failures)}`);
      assert.ok((report.checks as number) > 400, `rank ${report.rank} ran ${report.checks} checks`);
    }
    const mismatches = run.reports.map((r) => r.mismatch as Record<string, string>);
    assert.match(mismatches[0]?.dtype ?? '', /^MismatchError: .*data types for tensor 'mm-dtype'/);
    assert.match(mismatches[0]?.shape ?? '', /^MismatchError: .*shapes for tensor 'mm-shape'/);
    assert.match(mismatches[0]?.root ?? '', /^MismatchError: .*broadcast roots for tensor 'mm-root'/);
    for (const m of mismatches) assert.deepEqual(m, mismatches[0], 'every rank gets the same message');
  });
}
