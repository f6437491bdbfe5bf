/**
 * A rank SIGKILLed in the middle of allreduces: every other rank's collective rejects with
 * PeerFailureError naming it within a few seconds, and ringrun stops the job and reports the
 * killed rank as the first failure, with its exit (128+9), leaving no process behind. The same
 * with the engines on their callers' threads (RINGREDUCE_ENGINE_THREAD=0).
 */
import assert from 'node:assert/strict';
import { after, it, type TestContext } from 'node:test';
import {
  assertNoneRunning,
  cleanEnv,
  cleanUp,
  failures,
  kFailureJob,
  pidOf,
  RingrunRun,
  tempDir,
} from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-sigkill-');
after(() => cleanUp(dir));

for (const [engineThread, where] of [
  ['1', 'its own thread'],
  ['0', "the caller's thread"],
] as const) {
  it(
    `a rank killed mid-allreduce fails every peer with PeerFailureError naming it (engine on ${where})`,
    { timeout: 40_000 },
    (t) => killMidAllreduce(t, engineThread),
  );
}

async function killMidAllreduce(t: TestContext, engineThread: string): Promise<void> {
  const run = new RingrunRun(
    ['-np', '4', '--io-timeout', '10s', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, MODE: 'loop', RINGREDUCE_ENGINE_THREAD: engineThread }),
  );
  await run.waitFor('every rank to be in the loop', (r) => r.count('iteration 3') === 4);
  const killedAt = Date.now();
  process.kill(pidOf(dir, 2), 'SIGKILL');
  const result = await run.finished;

  assert.equal(result.code, 137, result.stderr);
  assert.match(result.stderr, /ringrun: rank 2 was killed by SIGKILL; stopping the other 3 ranks/);
  assert.match(
    result.stderr,
    /ringrun: job failed: rank 2 \(pid \d+\) was killed by SIGKILL\nringrun: last \d+ lines of rank 2:/,
  );
  const seen = failures(result.stdout);
  t.diagnostic(
    `detected after ${[0, 1, 3].map((rank) => `${(seen.get(rank)?.at ?? Number.NaN) - killedAt} ms (rank ${rank})`).join(', ')}`,
  );
  for (const rank of [0, 1, 3]) {
    const failure = seen.get(rank);
    assert.ok(failure, `rank ${rank} reported no failure\n${result.stdout}`);
    assert.equal(failure.name, 'PeerFailureError', failure.message);
    assert.equal(failure.peerRank, 2, failure.message);
    assert.match(failure.message, /^rank 2 /);
    // The dead rank's sockets close at once: detection is immediate, not an I/O timeout.
    assert.ok(failure.at - killedAt < 3000, `rank ${rank} learnt it after ${failure.at - killedAt} ms`);
  }
  assert.ok(result.endedAt - killedAt < 8000, `ringrun ended ${result.endedAt - killedAt} ms after the kill`);
  assertNoneRunning(dir, 4);
}
