/**
 * ringrun's start-up: a rank that exits before calling init() fails the job at once (not at the
 * start-up timeout, with a waiting rank's error), whichever rank it is (rank 0 hosts the store
 * the others wait for); a rank that never calls init() fails the job at the start-up timeout
 * with exit status 124, named, and the progress line says whom it waits for; a job whose
 * ranks never call init() at all is left alone.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kEarlyJob = fileURLToPath(new URL('./fixtures/early_exit_job.js', import.meta.url));

describe('start-up', { timeout: 90_000 }, () => {
  for (const rank of [2, 0]) {
    it(`a rank ${rank} that exits with code 0 before calling init() fails the job at once`, async () => {
      // Far longer than the harness lets ringrun run: only an early failure passes.
      const run = new RingrunRun(
        ['-np', '3', '--start-timeout', '2m', process.execPath, kEarlyJob],
        cleanEnv({ EARLY_RANK: String(rank) }),
      );
      const result = await run.finished;
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, new RegExp(`ringrun: rank ${rank} exited with code 0 before calling init\\(\\); stopping`));
      assert.match(
        result.stderr,
        new RegExp(
          `job failed: rank ${rank} \\(pid \\d+\\) exited with code 0 before calling init\\(\\)\\nringrun: last 1 lines of rank ${rank}:\\n.*leaving before init`,
        ),
      );
    });
  }

  it('a rank that never calls init() fails the job at the start-up timeout with 124, named', async () => {
    const run = new RingrunRun(
      ['-np', '3', '--verbose', '--start-timeout', '5s', process.execPath, kEarlyJob],
      cleanEnv({ EARLY_RANK: '2', HANG: '1' }),
    );
    const result = await run.finished;
    assert.equal(result.code, 124, result.stderr);
    assert.match(result.stderr, /ringrun: rank 2 did not call init\(\) within 5000 ms \(--start-timeout\); stopping the job/);
    assert.match(result.stderr, /job failed: rank 2 did not call init\(\) within 5000 ms\nringrun: last 1 lines of rank 2:/);
    assert.match(result.stderr, /ringrun: starting: 3\/3 ranks running, 2\/3 in init\(\), waiting for rank 2 to call init\(\)/);
    // The waiting ranks did not fail on their own first.
    assert.doesNotMatch(result.stderr, /TimeoutError/);
  });

  it('ranks that never call init() and exit 0 at different times are a job that succeeded', async () => {
    const script = 'setTimeout(() => console.log("ok"), 300 * Number(process.env.RINGREDUCE_RANK))';
    const run = new RingrunRun(['-np', '3', 'node', '-e', script], cleanEnv());
    const result = await run.finished;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(run.count('ok'), 3);
  });
});
