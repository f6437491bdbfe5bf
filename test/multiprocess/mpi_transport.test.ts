/**
 * MpiTransport in real MPI jobs (fixture: fixtures/mpi_transport_job.ts): the ring algorithms
 * over MPI point-to-point with a clean close, and what a timeout leaves behind. The transport
 * contract over MPI is transport_contract_mpi.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';

const skip = mpiSkipReason();

for (const np of [2, 3]) {
  test(`${np} ranks: ring algorithms over MPI point-to-point, then a close that finalises MPI`, { skip }, async () => {
    const run = await mpirun(np, 'mpi_transport_job', { args: ['ring'], timeoutMs: 60_000 });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.reports.length, np, describeRun(run));
    for (const r of run.reports) {
      assert.equal(r.ringAllreduce, 'ok', `rank ${r.rank}`);
      assert.equal(r.ringAllgather, 'ok', `rank ${r.rank}`);
    }
  });
}

test("after a receive times out the peer counts as failed, and the job ends with mpirun's message", {
  skip,
}, async () => {
  const run = await mpirun(2, 'mpi_transport_job', { args: ['timeout'], timeoutMs: 60_000 });
  assert.equal(run.reports.length, 2, describeRun(run));
  for (const r of run.reports) {
    assert.match(r.timeout as string, /^TimeoutError: /);
    assert.match(r.afterTimeout as string, /^PeerFailureError: rank \d \(MPI\): /);
  }
  // MPI was not finalised (a receive was abandoned): mpirun must end the job, not wait for it.
  assert.notEqual(run.code, 0, describeRun(run));
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});
