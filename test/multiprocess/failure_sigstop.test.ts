/**
 * A rank that is alive but stuck (SIGSTOP): its peers find it by its silence (unanswered
 * pings) in the middle of an allreduce, within 10 s with the default settings; one that stops
 * while the job is idle (nobody watches then: an idle job wakes nothing) is found by the pings
 * of the next collective. Every rank names it. ringrun reports the first rank to fail, says
 * that the stopped rank is stopped, and leaves no process behind (a stopped rank gets SIGCONT
 * after SIGTERM). And no false alarm: a rank whose main thread computes for 10 s (the default
 * declares a silent rank dead after 8 s), on a machine loaded with busy processes, is not
 * declared dead (its engine thread answers the pings).
 */

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
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

const kShortTimeouts = ['--io-timeout', `${kIoTimeoutMs}ms`, '--heartbeat', '300ms'];

/**
 * `idleMs`: how long the ranks sleep after `ready` before their next collective; `within`:
 * the window, from the SIGSTOP, in which every other rank must see the job broken.
 */
async function stopOneRank(
  t: TestContext,
  env: Record<string, string>,
  ready: string,
  idleMs = 0,
  flags = kShortTimeouts,
  within: [number, number] = [kIoTimeoutMs - 500, idleMs + kIoTimeoutMs + 3000],
): Promise<void> {
  const dir = tempDir('ringrun-sigstop-');
  dirs.push(dir);
  const run = new RingrunRun([...flags, '-np', '3', process.execPath, kFailureJob], cleanEnv({ DIR: dir, ...env }));
  await run.waitFor(ready, (r) => r.count(ready) === 3);
  const stoppedAt = Date.now();
  process.kill(pidOf(dir, 1), 'SIGSTOP');
  // Each engine logs the moment its job breaks, even while its caller sleeps.
  const detectedAfter = new Map<number, number>();
  await run.waitFor(
    'ranks 0 and 2 to see the job broken',
    (r) => {
      for (const rank of [0, 2]) {
        if (
          !detectedAfter.has(rank) &&
          new RegExp(`^\\[${rank}\\] ringreduce \\[rank ${rank}\\] ERROR: job broken: rank 1 `, 'm').test(r.stderr)
        ) {
          detectedAfter.set(rank, Date.now() - stoppedAt);
        }
      }
      return detectedAfter.size === 2;
    },
    within[1] + 5000,
  );
  t.diagnostic(`detected after ${[...detectedAfter].map(([rank, ms]) => `${ms} ms (rank ${rank})`).join(', ')}`);
  for (const [rank, ms] of detectedAfter) {
    // With short timeouts the limit is 1.2 s (four 300 ms intervals), counted from the next
    // collective when idle; the window allows for the ping period and a loaded machine.
    assert.ok(ms >= within[0] && ms < within[1], `rank ${rank} detected it after ${ms} ms`);
  }
  const result = await run.finished;

  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr, /ringrun: rank [02] exited with code 1; stopping the other (?:1 rank|2 ranks)/);
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

describe('a stopped rank', { timeout: 90_000 }, () => {
  it('is detected in the middle of allreduces by its silence', { timeout: 30_000 }, (t) =>
    stopOneRank(t, { MODE: 'loop' }, 'iteration 3', 0, kShortTimeouts, [kIoTimeoutMs - 500, kIoTimeoutMs + 3000]),
  );

  it('is detected within 10 s with the default settings (not the 30 s I/O timeout)', { timeout: 40_000 }, (t) =>
    // Four unanswered 2 s heartbeats: 8 s after it was last heard, which is when it stopped.
    stopOneRank(t, { MODE: 'loop' }, 'iteration 3', 0, [], [7000, 10_000]),
  );

  it('is detected at the next collective when it stops while the job is idle', { timeout: 30_000 }, (t) =>
    stopOneRank(t, { MODE: 'loop', IDLE_AT: '2', IDLE_MS: '3000' }, 'sleeping', 3000),
  );
});

/** `count` processes that spin on the CPU until killed: a loaded machine (2 cores here). */
function loadMachine(count: number): ChildProcess[] {
  return Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore', detached: false }));
}

describe('a busy rank', { timeout: 60_000 }, () => {
  it('whose main thread computes for 10 s, on a loaded machine, is not declared dead', { timeout: 50_000 }, async (t) => {
    const dir = tempDir('ringrun-busy-');
    dirs.push(dir);
    const hogs = loadMachine(4);
    try {
      const started = Date.now();
      const run = new RingrunRun(
        ['-np', '3', process.execPath, kFailureJob],
        cleanEnv({ DIR: dir, MODE: 'loop', ITERATIONS: '6', BLOCK_AT: '3', BLOCK_RANK: '1', BLOCK_MS: '10000' }),
        45_000,
      );
      const result = await run.finished;
      t.diagnostic(`ran ${Date.now() - started} ms with rank 1 blocked 10 s and ${hogs.length} busy processes`);
      assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
      assert.equal(run.count('blocking'), 1);
      assert.equal(run.count('done'), 3, result.stdout);
      assert.deepEqual([...failures(result.stdout).keys()], []);
      assert.doesNotMatch(result.stderr, /ERROR|job broken/);
    } finally {
      for (const hog of hogs) hog.kill('SIGKILL');
    }
  });
});
