/**
 * The MPI addon's native collectives in real MPI jobs (fixture:
 * fixtures/mpi_native_collectives_job.ts): MPI_Reduce_scatter, MPI_Alltoallv, MPI_Reduce,
 * MPI_Gatherv and MPI_Scatterv, and the bitwise reduce ops, against a reference every rank
 * computes itself; what supports() leaves to the engine; the refusals; the deadline's abort.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';

const skip = mpiSkipReason();

/** Float dtypes have 5 reduce ops MPI can do (sum, average, min, max, product), integer ones 7 (no average; band, bor, bxor). */
const kOpsOverDTypes = 2 * 5 + 8 * 7;

// 3 ranks with the engines on the callers' threads (RINGREDUCE_ENGINE_THREAD=0), where nothing
// but a pending call holds the event loop (MPI's completions come from its own thread).
for (const [np, engineThread] of [
  [2, '1'],
  [3, '0'],
] as const) {
  const where = engineThread === '1' ? '' : ", engines on the callers' threads";
  test(`${np} ranks${where}: every native collective over every dtype, uneven and zero counts, every root and reduce op; 2^20+3 elements`, {
    skip,
  }, async () => {
    const run = await mpirun(np, 'mpi_native_collectives_job', {
      args: ['check'],
      env: { RINGREDUCE_ENGINE_THREAD: engineThread },
      timeoutMs: 180_000,
    });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.reports.length, np, describeRun(run));
    for (const r of run.reports) {
      assert.deepEqual(r.failures, [], `rank ${r.rank}`);
      // Small cases per dtype, then the large ones (2 reduces and reducescatters, 1 of each other
      // collective); gather and scatter also check that the sender's buffers are left alone.
      const gatherChecks = 10 * np * 3 + 1;
      assert.deepEqual(
        r.checked,
        {
          allreduce: kOpsOverDTypes,
          reducescatter: kOpsOverDTypes * 3 + 2,
          reduce: kOpsOverDTypes * np * 2 + 2,
          gather: gatherChecks,
          // Per dtype and root: 3 patterns and 1 in place; the root also checks its input.
          scatter: 10 * (4 * np + 4) + 1 + (r.rank === 0 ? 1 : 0),
          alltoall: 10 * 2 + 1,
          refusals: 8,
        },
        `rank ${r.rank}`,
      );
      const supports = r.supports as Record<string, boolean>;
      for (const c of ['allreduce', 'reducescatter', 'reduce']) {
        assert.equal(supports[`${c} float32 average`], true, c);
        assert.equal(supports[`${c} int32 average`], false, c);
        assert.equal(supports[`${c} uint64 average`], false, c);
        for (const op of ['band', 'bor', 'bxor']) {
          assert.equal(supports[`${c} float32 ${op}`], false, `${c} ${op}`);
          assert.equal(supports[`${c} int32 ${op}`], true, `${c} ${op}`);
          assert.equal(supports[`${c} uint64 ${op}`], true, `${c} ${op}`);
        }
        assert.equal(supports[`${c} float32 sum`], true, c);
      }
      for (const c of ['alltoall', 'gather', 'scatter']) assert.equal(supports[c], true, c);
    }
  });
}

test('a native collective another rank never joins aborts the job past its deadline, naming it', { skip }, async () => {
  const run = await mpirun(2, 'mpi_native_collectives_job', { args: ['stall'], timeoutMs: 60_000 });
  assert.notEqual(run.code, 0, describeRun(run));
  assert.match(run.stderr, /rank 0 of 2: the MPI gather to rank 0 of 8 int32 did not finish within 1501 ms/, describeRun(run));
  assert.equal(run.reports.length, 0, describeRun(run));
  assert.ok(run.elapsedMs < 30_000, describeRun(run));
});
