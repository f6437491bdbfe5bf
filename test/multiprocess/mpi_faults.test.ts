/**
 * Faults and lifecycle on the MPI backend, in real MPI jobs (fixture: fixtures/mpi_fault_job.ts):
 * a rank that dies or freezes ends the whole job with a message, within seconds, instead of
 * hanging it; an idle engine uses (almost) no CPU; a script without shutdown() still exits cleanly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';

const skip = mpiSkipReason();

test("a rank killed by SIGKILL ends the job with mpirun's message naming it", { skip }, async () => {
  const run = await mpirun(3, 'mpi_fault_job', { args: ['kill'], timeoutMs: 60_000 });
  assert.notEqual(run.code, 0, describeRun(run));
  assert.match(run.stderr, /rank 2 with PID \d+ .*exited on signal 9|signal 9 \(Killed\)/s, describeRun(run));
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});

test('a rank that dies of an exception ends the job', { skip }, async () => {
  const run = await mpirun(2, 'mpi_fault_job', { args: ['throw'], timeoutMs: 60_000 });
  assert.notEqual(run.code, 0, describeRun(run));
  assert.match(run.stderr, /rank failed on purpose/, describeRun(run));
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});

test('a collective a frozen rank never joins aborts the job past its deadline, with a message', { skip }, async () => {
  const run = await mpirun(2, 'mpi_fault_job', {
    args: ['stop'],
    env: { RINGREDUCE_IO_TIMEOUT_MS: '1500' },
    timeoutMs: 60_000,
  });
  assert.notEqual(run.code, 0, describeRun(run));
  assert.match(
    run.stderr,
    /rank 0 of 2: the MPI allreduce \(sum\) of 65536 float32 did not finish within \d+ ms/,
    describeRun(run),
  );
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});

test('a script that never calls shutdown() still finalises MPI and exits 0', { skip }, async () => {
  const run = await mpirun(2, 'mpi_fault_job', { args: ['forget'], timeoutMs: 60_000 });
  assert.equal(run.code, 0, describeRun(run));
  assert.deepEqual(
    run.reports.map((r) => r.sum),
    [1, 1],
  );
});

test('an idle engine uses almost no CPU, and wakes up for the next collective', { skip }, async () => {
  const run = await mpirun(4, 'mpi_fault_job', { args: ['idle'], timeoutMs: 60_000 });
  assert.equal(run.code, 0, describeRun(run));
  assert.equal(run.reports.length, 4, describeRun(run));
  for (const r of run.reports) {
    // Generous bounds: the machine is shared; a polling loop would show ~100%.
    assert.ok((r.cpuPercent as number) < 10, `rank ${r.rank} used ${r.cpuPercent}% of a core while idle`);
    assert.ok((r.firstAfterIdleMs as number) < 1000, `rank ${r.rank}: ${r.firstAfterIdleMs} ms`);
  }
});

test('init() again after shutdown() fails with a message: MPI starts once per process', { skip }, async () => {
  const run = await mpirun(2, 'mpi_fault_job', { args: ['reinit'], timeoutMs: 60_000 });
  assert.equal(run.code, 0, describeRun(run));
  for (const r of run.reports) assert.match(r.error as string, /MPI was already finalised in this process/);
});
