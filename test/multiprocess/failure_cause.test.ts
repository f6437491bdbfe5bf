/**
 * ringrun names the rank that failed, not a rank that died of its failure. Rank 1 throws while
 * its peers wait in an allreduce: they die at once of a PeerFailureError naming it, often
 * before rank 1's own process has ended. The report names rank 1 and shows its error (name,
 * message, first frames), not the stack frames after it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Job } from '../../src/launcher/job.js';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kThrowJob = fileURLToPath(new URL('./fixtures/throw_job.js', import.meta.url));

function assertNamesRankOne(stderr: string): void {
  assert.match(stderr, /\nringrun: job failed: rank 1 \(pid \d+\) exited with code 1\n/, stderr);
  assert.match(stderr, /\nringrun: error of rank 1: Error: bad batch on rank 1\n/, stderr);
  const shown =
    stderr
      .split(/lines of rank 1, up to its error:\n/)[1]
      ?.trimEnd()
      .split('\n') ?? [];
  assert.equal(shown.at(-2), 'ringrun:   [1] Error: bad batch on rank 1', stderr);
  assert.match(shown.at(-1) ?? '', /^ringrun: {3}\[1\] {5}at .*throw_job\.js:\d+:\d+/, stderr);
  assert.doesNotMatch(stderr, /job failed: rank [02]/);
}

describe('the rank that failed first', { timeout: 60_000 }, () => {
  it('is named when its peers exit before it (its process ends a second after theirs)', async () => {
    // The shell around rank 1 outlives its node process by a second: its peers' exits come first.
    const script = 'node "$0"; code=$?; if [ "$RINGREDUCE_RANK" = 1 ]; then sleep 1; fi; exit $code';
    const run = new RingrunRun(['-np', '3', '--verbose', 'sh', '-c', script, kThrowJob], cleanEnv({ THROW_RANK: '1' }));
    const result = await run.finished;
    assert.equal(result.code, 1, result.stderr);
    assertNamesRankOne(result.stderr);
    // Its peers exited first, blaming rank 1, and ringrun waited for it.
    assert.match(result.stderr, /ringrun: waiting up to \d+ ms for rank 1 to exit: rank [02] died of its failure/);
  });

  it('is named when it throws while the others are in a collective', async () => {
    const run = new RingrunRun(['-np', '3', process.execPath, kThrowJob], cleanEnv({ THROW_RANK: '1' }));
    const result = await run.finished;
    assert.equal(result.code, 1, result.stderr);
    assertNamesRankOne(result.stderr);
  });

  it("is still named when it blames a rank of another launcher, once that launcher's report did not come", async () => {
    // One ringrun per node: rank 0 here dies of rank 5's failure, which only node 1's ringrun sees.
    const script = `
      class PeerFailureError extends Error { name = 'PeerFailureError'; }
      console.error(Object.assign(new PeerFailureError('rank 5 (10.0.0.5:4000): closed the connection'), { peerRank: 5 }));
      process.exit(1);`;
    const ignore = () => {};
    const job = new Job({
      ranks: [
        {
          rank: 0,
          command: process.execPath,
          args: ['-e', script],
          env: cleanEnv(),
          sinks: { stdout: ignore, stderr: ignore },
          tailLines: 10,
        },
      ],
      startTimeoutMs: 30_000,
      log: ignore,
      debug: ignore,
    });
    const outcome = await job.finished;
    assert.equal(outcome.exitCode, 1);
    assert.equal(outcome.failure?.exit.rank, 0);
    assert.equal(outcome.failure?.error?.peerRank, 5);
  });
});
