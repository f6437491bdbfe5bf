/**
 * ringrun killed outright (SIGKILL): the ranks it started must not run on as orphans. Each rank
 * runs under `sh -c` (the shell stays, the rank is its child: the whole process group must go)
 * and waits idle, as a rank in its data loader would; it puts off SIGTERM for 2 s (failure_job),
 * so the guard's SIGKILL is what ends it. Every rank must be gone within 2 s of the kill, and the
 * guard must say on ringrun's stderr why it stopped them (orphan_guard.ts). Then the same with
 * one rank on another host (network namespaces, skipped where they cannot be created), started
 * over ringrun's ssh path: its bootstrap stops it when the session's stdin ends with ringrun
 * (remote_shell.ts). The elastic modes are covered by store_lost.test.ts (the driver) and
 * elastic_per_node_netns.test.ts (a node's agent).
 */
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createNet, type Net } from './fixtures/netns.js';
import { cleanEnv, cleanUp, kFailureJob, pidOf, RingrunRun, running, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-killed-');
const remoteDir = tempDir('ringrun-killed-remote-');
const net = createNet(2, remoteDir);
after(() => {
  if ('destroy' in net) net.destroy();
  cleanUp(dir);
  cleanUp(remoteDir);
});

const kIdle = { MODE: 'loop', IDLE_AT: '1', IDLE_MS: '20000' };

/** Kills ringrun once every rank is idle; resolves with the ranks' pids once they are gone (or 5 s have passed), and how long that took. */
async function killRingrun(run: RingrunRun, pidDir: string): Promise<{ ranks: number[]; goneAfter: number }> {
  await run.waitFor('both ranks to be idle', (r) => r.count('sleeping') === 2);
  const ranks = [pidOf(pidDir, 0), pidOf(pidDir, 1)];
  const killedAt = Date.now();
  run.child.kill('SIGKILL');
  while (ranks.some(running) && Date.now() - killedAt < 5000) await sleep(20);
  assert.deepEqual(ranks.filter(running), [], 'ranks still running 5 s after ringrun was killed');
  return { ranks, goneAfter: Date.now() - killedAt };
}

it('ringrun SIGKILLed: its ranks and their children are stopped within 2 s, saying why', { timeout: 30_000 }, async (t) => {
  const run = new RingrunRun(
    ['-np', '2', 'sh', '-c', '"$0" "$1"; exit 0', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, ...kIdle }),
  );
  const { ranks, goneAfter } = await killRingrun(run, dir);
  t.diagnostic(`ringrun killed: its ranks were gone ${goneAfter} ms later`);
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

it('ringrun SIGKILLed with a rank on another host: that one is stopped by its ssh bootstrap', {
  timeout: 30_000,
  skip: 'skip' in net ? net.skip : false,
}, async (t) => {
  const { hosts, names, ssh } = net as Net;
  const forwarded = ['DIR', ...Object.keys(kIdle)].flatMap((name) => ['-x', name]);
  const run = new RingrunRun(
    ['-H', `${hosts[0]}:1,${hosts[1]}:1`, '--ssh-command', ssh, ...forwarded, process.execPath, kFailureJob],
    cleanEnv({ DIR: remoteDir, ...kIdle }),
    30_000,
    ['ip', 'netns', 'exec', names[0] as string],
  );
  const { goneAfter } = await killRingrun(run, remoteDir);
  t.diagnostic(`ringrun killed: its local and remote ranks were gone ${goneAfter} ms later`);
  assert.ok(goneAfter < 2500, `the ranks took ${goneAfter} ms to go`);
  const { stderr } = await run.finished;
  assert.match(stderr, /that started them is gone \(killed, or crashed\): stopping rank 0 \(pid \d+\) \(SIGTERM/);
});
