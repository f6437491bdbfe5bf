/**
 * A rank that is alive but stuck (SIGSTOP): its peers find it by the I/O deadline in the
 * middle of an allreduce; one that stops while the job is idle (nobody watches then: an idle
 * job wakes nothing) is found by the pings of the next collective. Every rank names it.
 * ringrun reports the first rank to fail, says that the stopped rank is stopped, and leaves no
 * process behind (a stopped rank gets SIGCONT after SIGTERM).
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from 'node:test';
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

const kIoTimeoutMs = 1500;
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) cleanUp(dir);
});

/** `idleMs`: how long the ranks sleep after `ready` before their next collective. */
async function stopOneRank(t: TestContext, env: Record<string, string>, ready: string, idleMs = 0): Promise<void> {
  const dir = tempDir('ringrun-sigstop-');
  dirs.push(dir);
  const run = new RingrunRun(
    ['-np', '3', '--io-timeout', `${kIoTimeoutMs}ms`, '--heartbeat', '300ms', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, ...env }),
  );
  await run.waitFor(ready, (r) => r.count(ready) === 3);
  const stoppedAt = Date.now();
  process.kill(pidOf(dir, 1), 'SIGSTOP');
  // Each engine logs the moment its job breaks, even while its caller sleeps.
  const detectedAfter = new Map<number, number>();
  await run.waitFor('ranks 0 and 2 to see the job broken', (r) => {
    for (const rank of [0, 2]) {
      if (
        !detectedAfter.has(rank) &&
        new RegExp(`^\\[${rank}\\] ringreduce \\[rank ${rank}\\] ERROR: job broken: rank 1 `, 'm').test(r.stderr)
      ) {
        detectedAfter.set(rank, Date.now() - stoppedAt);
      }
    }
    return detectedAfter.size === 2;
  });
  t.diagnostic(`detected after ${[...detectedAfter].map(([rank, ms]) => `${ms} ms (rank ${rank})`).join(', ')}`);
  for (const [rank, ms] of detectedAfter) {
    // The deadline is 1.5 s, counted from the next collective when idle; allow for the ping
    // period and a loaded machine.
    assert.ok(ms >= kIoTimeoutMs - 500 && ms < idleMs + kIoTimeoutMs + 3000, `rank ${rank} detected it after ${ms} ms`);
  }
  const result = await run.finished;

  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr, /ringrun: rank [02] exited with code 1; stopping the other 2 ranks/);
  assert.match(result.stderr, /ringrun: rank 1 \(pid \d+\) is stopped \(SIGSTOP or a debugger\)/);
  const seen = failures(result.stdout);
  for (const rank of [0, 2]) {
    const failure = seen.get(rank);
    assert.ok(failure, `rank ${rank} reported no failure\n${result.stdout}\n${result.stderr}`);
    assert.equal(failure.name, 'PeerFailureError', failure.message);
    assert.equal(failure.peerRank, 1, failure.message);
  }
  assertNoneRunning(dir, 3);
}

describe('a stopped rank', { timeout: 60_000 }, () => {
  it('is detected in the middle of allreduces by the I/O deadline', { timeout: 30_000 }, (t) =>
    stopOneRank(t, { MODE: 'loop' }, 'iteration 3'),
  );

  it('is detected at the next collective when it stops while the job is idle', { timeout: 30_000 }, (t) =>
    stopOneRank(t, { MODE: 'loop', IDLE_AT: '2', IDLE_MS: '3000' }, 'sleeping', 3000),
  );
});
