/**
 * The elastic per-node mode across "nodes" with their own addresses (network namespaces,
 * fixtures/netns.ts): `ringrun --elastic --nnodes 2:3 --nproc-per-node 1 --rdzv-endpoint` in
 * each namespace, the one whose address is the endpoint's hosting the rendezvous. Two nodes
 * start; a third, started once the job runs, joins at a commit; then one of the first two is
 * SIGKILLed with its worker, and the others go on from the last commit. The two workers that
 * finish hold identical values equal to what the size history implies. Then the hosting node's
 * loss: every other launcher stops its workers and fails with a message saying so. Skips,
 * saying why, where namespaces cannot be created.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createNet, type Net } from './fixtures/netns.js';
import { cleanEnv, cleanUp, pidsIn, RingrunRun, running, tempDir } from './fixtures/ringrun_harness.js';

const kJob = fileURLToPath(new URL('./fixtures/elastic_job.js', import.meta.url));
const dir = tempDir('ringrun-elastic-nodes-');
const net = createNet(3, dir);
after(() => {
  if ('destroy' in net) net.destroy();
  cleanUp(dir);
});

interface Report {
  worker: string;
  rank: number;
  size: number;
  value: number[];
  sizes: number[];
  recoveredAt: number[];
}

function reports(stdout: string): Report[] {
  return stdout
    .split('\n')
    .filter((line) => line.includes('ELASTIC-REPORT '))
    .map((line) => JSON.parse(line.slice(line.indexOf('ELASTIC-REPORT ') + 15)) as Report);
}

/** Each committed step allreduced [1, rank] over the ranks of that step. */
function expected(sizes: readonly number[]): number[] {
  return sizes.reduce(([a, b], n) => [a + n, b + (n * (n - 1)) / 2], [0, 0]);
}

/** The sizes with runs collapsed: [4, 4, 6, 6, 4] -> [2, 3, 2]. */
function phases(sizes: readonly number[]): number[] {
  return sizes.filter((n, i) => i === 0 || sizes[i - 1] !== n);
}

/** The launcher of namespace `i`, on the endpoint of namespace 0. */
function launcher(i: number, env: NodeJS.ProcessEnv, extra: string[] = []): RingrunRun {
  const { hosts, names } = net as Net;
  return new RingrunRun(
    [
      '--elastic',
      '--nnodes',
      '2:3',
      '--nproc-per-node',
      '1',
      '--rdzv-endpoint',
      `${hosts[0]}:29400`,
      '--io-timeout',
      '1500ms',
      '--heartbeat',
      '300ms',
      '--start-timeout',
      '15s',
      '--rdzv-last-call',
      '0s',
      ...extra,
      'node',
      kJob,
    ],
    env,
    40_000,
    ['ip', 'netns', 'exec', names[i] as string],
  );
}

/** The node index the launcher took at the rendezvous. */
function nodeIndex(run: RingrunRun): number {
  return Number(/this is node (\d+)/.exec(run.stderr)?.[1]);
}

const skip = 'skip' in net ? net.skip : false;

describe('ringrun --elastic per node, across network namespaces', { skip, timeout: 60_000 }, () => {
  it('a node started mid-job joins; a node SIGKILLed with its worker leaves; the others finish alike', {
    timeout: 45_000,
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
    const first = [launcher(1, env), launcher(0, env)];
    const [victim, host] = first as [RingrunRun, RingrunRun];
    const committedIn = (generation: number) => () => readdirSync(generations).includes(String(generation));
    await host.waitFor('the first committed step', committedIn(1), 20_000);
    const late = launcher(2, env);
    await host.waitFor('a commit with the third node', committedIn(2), 20_000);
    assert.match(host.stderr, /generation 2: 3 workers on nodes/);
    const k = nodeIndex(victim);
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    for (const file of readdirSync(pids).filter((name) => name.startsWith(`n${k}w`))) {
      process.kill(Number(readFileSync(join(pids, file), 'utf8')), 'SIGKILL');
    }
    await host.waitFor('a commit of the survivors', committedIn(3), 20_000);
    assert.match(host.stderr, /generation 3: 2 workers on nodes/);
    writeFileSync(until, '');
    const [hostEnd, lateEnd, victimEnd] = await Promise.all([host.finished, late.finished, victim.finished]);

    assert.equal(victimEnd.signal, 'SIGKILL');
    assert.equal(hostEnd.code, 0, hostEnd.stderr);
    assert.equal(lateEnd.code, 0, lateEnd.stderr);
    assert.match(hostEnd.stderr, new RegExp(`node ${k} \\(.*\\) left: its ringrun's connection to the rendezvous closed`));
    const done = [...reports(hostEnd.stdout), ...reports(lateEnd.stdout)].sort((a, b) => a.rank - b.rank);
    assert.equal(done.length, 2, `${hostEnd.stdout}\n${lateEnd.stdout}`);
    const sizes = done[0]?.sizes ?? [];
    assert.deepEqual(phases(sizes), [2, 3, 2], `history ${sizes.join('')}`);
    for (const report of done) {
      assert.equal(report.size, 2);
      assert.deepEqual(report.sizes, sizes, `${report.worker} has the same history`);
      assert.deepEqual(report.value, expected(sizes), `${report.worker} has the values the history implies`);
    }
    assert.deepEqual(
      done.map((r) => r.worker),
      [nodeIndex(host), nodeIndex(late)].map((n) => `n${n}w0`),
      'ranks node by node, the survivors in their order',
    );
    const recovered = Math.max(...done.map((r) => r.recoveredAt.find((at) => at >= killedAt) ?? Number.NaN));
    t.diagnostic(`node lost: the survivors committed again ${recovered - killedAt} ms after the SIGKILL`);
    const deadline = Date.now() + 5000;
    const alive = () => pidsIn(pids).filter((pid) => running(pid));
    while (alive().length > 0 && Date.now() < deadline) await sleep(100);
    assert.deepEqual(alive(), [], 'workers left running');
  });
});
