/**
 * A rank that never submits a tensor the others wait for: rank 0's stall inspector warns,
 * naming the rank and the tensor, after the warning time; after the stall timeout the
 * collective fails on the ranks that submitted it with a TimeoutError naming the missing rank.
 * The job itself goes on and ends normally.
 */
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { assertNoneRunning, cleanEnv, cleanUp, failures, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-stall-');
after(() => cleanUp(dir));

it('names the rank that did not submit, warns, then fails the collective', { timeout: 30_000 }, async () => {
  const run = new RingrunRun(
    ['-np', '3', '--stall-warning', '300ms', '--stall-timeout', '1500ms', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, MODE: 'stall', STALL_RANK: '2', STALL_SLEEP_MS: '2500' }),
  );
  const result = await run.finished;
  assert.equal(result.code, 0, result.stderr);
  // The warning comes from rank 0 only, once.
  const warnings = result.stderr.split('\n').filter((line) => line.includes('WARN: Stall:'));
  assert.equal(warnings.length, 1, result.stderr);
  assert.match(
    warnings[0] ?? '',
    /^\[0\] ringreduce \[rank 0\] WARN: Stall: 1 tensor has waited 300 ms for some ranks: rank 2 has not submitted 'lonely'\. .*they fail after 1500 ms\.$/,
  );
  const seen = failures(result.stdout);
  for (const rank of [0, 1]) {
    const failure = seen.get(rank);
    assert.ok(failure, `rank ${rank} reported no failure\n${result.stdout}`);
    assert.equal(failure.name, 'TimeoutError');
    assert.match(
      failure.message,
      /^Collective 'lonely' timed out after 1500 ms in negotiation: ranks 2 did not submit it \(ranks 0, 1 did\)\.$/,
    );
  }
  assert.equal(run.count('done'), 3);
  assertNoneRunning(dir, 3);
});
