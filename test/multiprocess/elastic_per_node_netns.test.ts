/**
 * The elastic per-node mode across "nodes" with their own addresses (network namespaces,
 * fixtures/netns.ts): `ringrun --elastic --nnodes 1:3 --nproc-per-node 2 --rdzv-endpoint` in
 * each namespace, the one whose address is the endpoint's hosting the rendezvous. Two nodes
 * start (the first round may hold one of them: the other then joins at a commit); a third,
 * started once the job runs on both, joins at a commit; then, at different steps, the third
 * node's link is cut (it leaves when its heartbeat lapses, its workers when they do not ask for
 * the next generation) and the second node's ringrun alone is SIGKILLed: its guard
 * (orphan_guard.ts) stops its two workers within 2 s, and the node leaves as a dead one. The
 * hosting node's two workers finish with identical values equal to what the size history
 * implies, and no worker is left running anywhere. Skips, saying why, where namespaces cannot be
 * created.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { elasticReports, expectedValue, phases } from './fixtures/elastic_reports.js';
import { createNet, type Net } from './fixtures/netns.js';
import { cleanEnv, cleanUp, pidsIn, RingrunRun, running, tempDir } from './fixtures/ringrun_harness.js';

const kJob = fileURLToPath(new URL('./fixtures/elastic_job.js', import.meta.url));
const kIoTimeoutMs = 1500;
const dir = tempDir('ringrun-elastic-nodes-');
const net = createNet(3, dir);
after(() => {
  if ('destroy' in net) net.destroy();
  cleanUp(dir);
});

/** The launcher of namespace `i`, on the endpoint of namespace 0. */
function launcher(i: number, env: NodeJS.ProcessEnv): RingrunRun {
  const { hosts, names } = net as Net;
  return new RingrunRun(
    [
      '--elastic',
      '--nnodes',
      '1:3',
      '--nproc-per-node',
      '2',
      '--rdzv-endpoint',
      `${hosts[0]}:29400`,
      '--io-timeout',
      `${kIoTimeoutMs}ms`,
      '--heartbeat',
      '300ms',
      '--start-timeout',
      '15s',
      '--rdzv-last-call',
      '0s',
      'node',
      kJob,
    ],
    env,
    50_000,
    ['ip', 'netns', 'exec', names[i] as string],
  );
}

/** The node index the launcher took at the rendezvous. */
function nodeIndex(run: RingrunRun): number {
  return Number(/this is node (\d+)/.exec(run.stderr)?.[1]);
}

const skip = 'skip' in net ? net.skip : false;

describe('ringrun --elastic per node, across network namespaces', { skip, timeout: 70_000 }, () => {
  it('2 workers per node: a node joins; a node cut off leaves; a node whose ringrun is SIGKILLed leaves with its workers; the last finishes', {
    timeout: 55_000,
  }, async (t) => {
    const jobDir = join(dir, 'job');
    const pids = join(jobDir, 'pids');
    const generations = join(jobDir, 'generations');
    mkdirSync(pids, { recursive: true });
    mkdirSync(generations);
    const until = join(jobDir, 'until');
    const env = cleanEnv({
      STEPS: '10',
      STEP_MS: '20',
      UNTIL_FILE: until,
      GENERATION_DIR: generations,
      PID_DIR: pids,
      RINGREDUCE_SECRET: 'a-secret-shared-by-every-node',
    });
    const [killed, host] = [launcher(1, env), launcher(0, env)];
    /** Waits for the first commit of the next generation of `workers` workers; returns its number. */
    let seen = 0;
    const committedWith = async (workers: number, what: string): Promise<number> => {
      let generation = 0;
      await host.waitFor(
        what,
        (r) => {
          const found = [...r.stderr.matchAll(/generation (\d+): (\d+) workers/g)].find(
            (m) => Number(m[1]) > seen && Number(m[2]) === workers,
          );
          generation = Number(found?.[1] ?? 0);
          return generation > 0 && readdirSync(generations).includes(String(generation));
        },
        20_000,
      );
      seen = generation;
      return generation;
    };
    await committedWith(4, 'a commit of both first nodes');
    const cutOff = launcher(2, env);
    await committedWith(6, 'a commit with the third node');
    await sleep(100); // a few steps on
    const cutAt = Date.now();
    (net as Net).cut(2);
    await committedWith(4, 'a commit of the nodes left after the cut');
    const k = nodeIndex(killed);
    const workersOf = (node: number) =>
      readdirSync(pids)
        .filter((name) => name.startsWith(`n${node}w`))
        .map((name) => Number(readFileSync(join(pids, name), 'utf8')));
    const orphans = workersOf(k);
    assert.equal(orphans.length, 2, `pid files: ${readdirSync(pids).join(', ')}`);
    await sleep(100);
    const killedAt = Date.now();
    killed.child.kill('SIGKILL');
    while (orphans.some(running) && Date.now() - killedAt < 5000) await sleep(20);
    const orphansGone = Date.now() - killedAt;
    assert.deepEqual(orphans.filter(running), [], `node ${k}'s workers still run 5 s after its ringrun was SIGKILLed`);
    await committedWith(2, 'a commit of the last node');
    writeFileSync(until, '');
    const [hostEnd, killedEnd, cutEnd] = await Promise.all([host.finished, killed.finished, cutOff.finished]);

    assert.equal(hostEnd.code, 0, hostEnd.stderr);
    assert.equal(killedEnd.signal, 'SIGKILL');
    assert.match(killedEnd.stderr, /ringrun \(pid \d+\) that started them is gone .*: stopping rank \d+ \(pid \d+\), rank \d+/);
    assert.equal(cutEnd.code, 1, cutEnd.stderr);
    assert.match(cutEnd.stderr, /job failed: lost the rendezvous at /);
    const c = nodeIndex(cutOff);
    assert.match(hostEnd.stderr, new RegExp(`node ${c} \\(.*\\) left: its ringrun was not heard from`));
    assert.match(hostEnd.stderr, new RegExp(`node ${k} \\(.*\\) left: its ringrun's connection to the rendezvous closed`));
    const done = elasticReports(hostEnd.stdout);
    assert.equal(done.length, 2, hostEnd.stdout);
    const sizes = done[0]?.sizes ?? [];
    const history = phases(sizes);
    // The first round may have published the node that was ready first alone.
    assert.ok(['4,6,4,2', '2,4,6,4,2'].includes(history.join()), `history ${sizes.join('')}`);
    for (const report of done) {
      assert.equal(report.size, 2);
      assert.deepEqual(report.sizes, sizes, `${report.worker} has the same history`);
      assert.deepEqual(report.value, expectedValue(sizes), `${report.worker} has the values the history implies`);
    }
    const h = nodeIndex(host);
    assert.deepEqual(
      done.map((r) => [r.worker, ...r.placement]),
      [
        [`n${h}w0`, 0, 2, 0, 1],
        [`n${h}w1`, 1, 2, 0, 1],
      ],
      'the last node: its local ranks in order',
    );
    const recovery = (from: number) => Math.max(...done.map((r) => r.recoveredAt.find((at) => at >= from) ?? Number.NaN)) - from;
    t.diagnostic(
      `node cut off: the survivors committed again ${recovery(cutAt)} ms after the cut (--io-timeout ${kIoTimeoutMs}ms)`,
    );
    t.diagnostic(
      `node's ringrun SIGKILLed: its workers were gone ${orphansGone} ms later; the survivors committed again ${recovery(killedAt)} ms after the SIGKILL`,
    );
    assert.ok(orphansGone < 2000, `node ${k}'s workers took ${orphansGone} ms to go`);
    const deadline = Date.now() + 5000;
    const alive = () => pidsIn(pids).filter((pid) => running(pid));
    while (alive().length > 0 && Date.now() < deadline) await sleep(100);
    assert.deepEqual(alive(), [], 'workers left running');
    assert.equal(pidsIn(pids).length, 6);
  });
});
