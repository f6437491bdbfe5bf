/**
 * MpiTransport in real MPI jobs (fixture: fixtures/mpi_transport_job.ts): the Transport
 * contract over MPI point-to-point, the ring algorithms over it, close, and timeouts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';

const skip = mpiSkipReason();

for (const np of [2, 3]) {
  test(`${np} ranks: FIFO per tag, control in order, zero-length, wrong length, ring algorithms over MPI point-to-point, close`, {
    skip,
  }, async () => {
    const run = await mpirun(np, 'mpi_transport_job', { args: ['contract'], timeoutMs: 60_000 });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.reports.length, np, describeRun(run));
    for (const r of run.reports) {
      const left = (r.rank + np - 1) % np;
      assert.deepEqual(
        r.fifo,
        [0, 1, 2].map((i) => [i, left]),
        `rank ${r.rank}`,
      );
      assert.equal(r.control, 'in order');
      assert.equal(r.zeroLength, 'ok');
      assert.match(r.short as string, /^ProtocolError: recv from rank \d with tag 9: the message has 3 bytes, expected 4/);
      assert.equal(r.ringAllreduce, 'ok');
      assert.equal(r.ringAllgather, 'ok');
      assert.match(r.pendingAtClose as string, /^ShutdownError/);
      assert.match(r.afterClose as string, /^ShutdownError/);
    }
  });
}

test("a receive nobody answers times out, then the peer counts as failed, and the job ends with mpirun's message", {
  skip,
}, async () => {
  const run = await mpirun(2, 'mpi_transport_job', { args: ['timeout'], timeoutMs: 60_000 });
  assert.equal(run.reports.length, 2, describeRun(run));
  for (const r of run.reports) {
    assert.match(r.timeout as string, /^TimeoutError: recv from rank \d with tag 10 did not complete within 1500 ms/);
    assert.match(r.afterTimeout as string, /^PeerFailureError: rank \d \(MPI\): /);
  }
  // MPI was not finalised (a receive was abandoned): mpirun must end the job, not wait for it.
  assert.notEqual(run.code, 0, describeRun(run));
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});
