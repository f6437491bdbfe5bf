/**
 * ringrun killed outright (SIGKILL): the ranks it started must not run on as orphans. Each rank
 * runs under `sh -c` (the shell stays, the rank is its child: the whole process group must go)
 * and waits idle, as a rank in its data loader would; it puts off SIGTERM for 2 s (failure_job),
 * so the guard's SIGKILL is what ends it. Every rank must be gone within 2 s of the kill, and the
 * guard must say on ringrun's stderr why it stopped them (orphan_guard.ts). Then the same with
 * one rank on another host (network namespaces, skipped where they cannot be created), started
 * over ringrun's ssh path: its bootstrap stops it when the session's stdin ends with ringrun
 * (remote_shell.ts). Then with a browser rank in the headless Chromium ringrun opened
 * (--headless; skipped where chromium is not installed): Chromium's whole process group must go
 * too, named by the guard. The elastic modes are covered by store_lost.test.ts (the driver) and
 * elastic_per_node_netns.test.ts (a node's agent).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { after, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
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
const kChromium = process.env.CHROME_PATH ?? '/usr/bin/chromium';
const kBrowserLoopJob = fileURLToPath(new URL('./fixtures/browser_loop_job.js', import.meta.url));

/** /proc/PID/stat's fields after the command's name: [state, ppid, pgrp, ...]. */
function statOf(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** The live processes (zombies count as gone) whose field `index` of statOf is `value`. */
function processesWhere(index: number, value: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      const fields = statOf(pid);
      return fields !== undefined && !/^[ZX]$/.test(fields[0] as string) && Number(fields[index]) === value;
    });
}

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

it("ringrun --headless SIGKILLed: its Chromium and every process of Chromium's group are stopped, named by the guard", {
  timeout: 60_000,
  skip: existsSync(kChromium) ? false : `no chromium at ${kChromium} (apt-get install chromium; CHROME_PATH)`,
}, async (t) => {
  const run = new RingrunRun(
    ['-np', '1', '--browser', '1', '--headless', process.execPath, kBrowserLoopJob],
    cleanEnv(kChromium === '/usr/bin/chromium' ? {} : { CHROME_PATH: kChromium }),
    60_000,
  );
  await run.waitFor('the Node rank and the tab to be running', (r) => (r.stdout.match(/\] READY /g) ?? []).length === 2, 45_000);
  const launcherPid = run.child.pid as number;
  // Chromium is ringrun's child (puppeteer starts it detached: it leads a group of its own, as the Node rank does).
  const [chromium] = processesWhere(1, launcherPid).filter(
    (pid) => statOf(pid)?.[2] === String(pid) && commandOf(pid).includes('chromium'),
  );
  assert.ok(chromium !== undefined, 'no child of ringrun is a Chromium leading its process group');
  // A killed ringrun cannot remove Chromium's profile: the test does.
  const profile = /--user-data-dir=([^\0]+)/.exec(commandOf(chromium))?.[1];
  if (profile?.includes('ringrun-chromium-')) after(() => rmSync(profile, { recursive: true, force: true }));
  const group = processesWhere(2, chromium);
  assert.ok(group.length > 1, `Chromium's group holds its renderers too: ${group.join(', ')}`);
  const killedAt = Date.now();
  run.child.kill('SIGKILL');
  while (processesWhere(2, chromium).length > 0 && Date.now() - killedAt < 5000) await sleep(20);
  const goneAfter = Date.now() - killedAt;
  t.diagnostic(`ringrun killed: Chromium's ${group.length} processes were gone ${goneAfter} ms later`);
  assert.deepEqual(processesWhere(2, chromium), [], "Chromium's processes still running 5 s after ringrun was killed");
  assert.ok(goneAfter < 2500, `Chromium took ${goneAfter} ms to go`);
  const { stderr } = await run.finished;
  assert.match(
    stderr,
    new RegExp(
      `that started them is gone \\(killed, or crashed\\): stopping rank 0 \\(pid \\d+\\), headless Chromium \\(pid ${chromium}\\)`,
    ),
  );
});
