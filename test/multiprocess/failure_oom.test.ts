/**
 * A rank that runs out of memory mid-job: rank 1 of 2, its heap capped with
 * --max-old-space-size, allocates until V8 aborts it. Its peer must name it (a
 * PeerFailureError whose peerRank is 1), and ringrun must report rank 1, that it ran out of
 * memory, and V8's line saying so, never a hang. Prints how long after rank 1 began to
 * allocate its peer failed (the filling of its heap included).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { cleanEnv, cleanUp, failures, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

describe('a rank that runs out of memory', { timeout: 60_000 }, () => {
  const dir = tempDir('ringreduce-oom-');
  after(() => cleanUp(dir));

  it('is named by every peer and by ringrun, which says it ran out of memory', async () => {
    const script = `if [ "$RINGREDUCE_RANK" = 1 ]; then exec "${process.execPath}" --max-old-space-size=20 "$0"; else exec "${process.execPath}" "$0"; fi`;
    const run = new RingrunRun(
      ['-np', '2', 'sh', '-c', script, kFailureJob],
      cleanEnv({ DIR: dir, ITERATIONS: '200', OOM_RANK: '1', OOM_AT: '1' }),
    );
    await run.waitFor('rank 1 to allocate', (r) => r.stdout.includes('[1] allocating'));
    const allocating = Date.now();
    const result = await run.finished;
    assert.equal(result.code, 134, result.stderr); // 128 + SIGABRT
    assert.match(result.stderr, /\nringrun: job failed: rank 1 \(pid \d+\) was killed by SIGABRT: it ran out of memory\n/);
    assert.match(result.stderr, /\nringrun: error of rank 1: FATAL ERROR: .*JavaScript heap out of memory\n/);
    assert.doesNotMatch(result.stderr, /job failed: rank 0/);
    const reports = failures(result.stdout);
    for (const rank of [0]) {
      const failure = reports.get(rank);
      // A peer stopped by ringrun before it reported is fine; one that reported names rank 1.
      if (failure === undefined) continue;
      assert.equal(failure.name, 'PeerFailureError', failure.message);
      assert.equal(failure.peerRank, 1, failure.message);
      console.log(`# rank ${rank} failed ${failure.at - allocating} ms after rank 1 began to allocate: ${failure.message}`);
    }
    assert.ok(reports.size > 0, `no peer reported the failure:\n${result.stdout}`);
  });
});
