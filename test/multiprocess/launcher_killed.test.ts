/**
 * ringrun killed outright (SIGKILL): the ranks it started must not run on as orphans. Each rank
 * runs under `sh -c` (the shell stays, the rank is its child: the whole process group must go)
 * and waits idle, as a rank in its data loader would; it puts off SIGTERM for 2 s (failure_job),
 * so the guard's SIGKILL is what ends it. Every rank must be gone within 2 s of the kill, and the
 * guard must say on ringrun's stderr why it stopped them (orphan_guard.ts). The elastic modes
 * are covered by store_lost.test.ts (the driver) and elastic_per_node_netns.test.ts (a node's
 * agent).
 */
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { cleanEnv, cleanUp, kFailureJob, pidOf, RingrunRun, running, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-killed-');
after(() => cleanUp(dir));

it('ringrun SIGKILLed: its ranks and their children are stopped within 2 s, saying why', { timeout: 30_000 }, async (t) => {
  const run = new RingrunRun(
    ['-np', '2', 'sh', '-c', '"$0" "$1"; exit 0', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, MODE: 'loop', IDLE_AT: '1', IDLE_MS: '20000' }),
  );
  await run.waitFor('both ranks to be idle', (r) => r.count('sleeping') === 2);
  const ranks = [pidOf(dir, 0), pidOf(dir, 1)];
  const killedAt = Date.now();
  run.child.kill('SIGKILL');
  while (ranks.some(running) && Date.now() - killedAt < 5000) await sleep(20);
  const goneAfter = Date.now() - killedAt;
  t.diagnostic(`ringrun killed: its ranks were gone ${goneAfter} ms later`);
  assert.deepEqual(ranks.filter(running), [], 'ranks still running 5 s after ringrun was killed');
  assert.ok(goneAfter < 2000, `the ranks took ${goneAfter} ms to go`);
  // The guard writes to ringrun's stderr, which the test still reads.
  const { stderr } = await run.finished;
  const said = new RegExp(
    `ringrun: ringrun \\(pid ${run.child.pid}\\) that started them is gone \\(killed, or crashed\\): stopping rank 0 \\(pid (\\d+)\\), rank 1 \\(pid (\\d+)\\)`,
  ).exec(stderr);
  assert.ok(said, stderr);
  const shells = [Number(said[1]), Number(said[2])];
  assert.notDeepEqual(shells, ranks, 'the groups are led by the shells');
  assert.deepEqual(shells.filter(running), [], 'the shells were stopped with their ranks');
});
