/**
 * The conformance cases (cases/index.ts) on the MPI backend: every rank a real process of an
 * MPI job (mpirun -np 3: an odd size; the in-process backends cover 2 and 4), all communication through the native addon (fixture:
 * test/multiprocess/fixtures/mpi_conformance_job.ts). Every case runs here, the ...Sync ones
 * included (a process per rank), but the 2^20 + 3 element ones (cases/runner.ts,
 * mpiCaseSkipReason). Skipped, with the reason, where the addon is not built or mpirun is missing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';
import { kCases } from './cases/index.js';
import { casesDigest, mpiCaseSkipReason } from './cases/runner.js';

const skip = mpiSkipReason();

for (const np of [3]) {
  const cases = kCases.filter((c) => mpiCaseSkipReason(c, np) === undefined).map((c) => c.name);
  test(`MPI backend, ${np} ranks: the ${cases.length} conformance cases`, { skip }, async () => {
    const run = await mpirun(np, 'mpi_conformance_job', { timeoutMs: 240_000 });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.reports.length, np, describeRun(run));
    const failures = run.reports.flatMap((report) => report.failures as string[]);
    assert.deepEqual(failures, [], failures.join('\n'));
    for (const report of run.reports) {
      assert.deepEqual([report.ran, report.digest], [cases.length, casesDigest(cases)], `rank ${report.rank} ran every case`);
    }
  });
}
