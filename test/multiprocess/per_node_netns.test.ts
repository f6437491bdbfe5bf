/**
 * The per-node mode across "nodes" with their own IP addresses (network namespaces,
 * fixtures/netns.ts): one `ringrun --nnodes 2 --node-rank i --nproc-per-node 2 --rdzv-endpoint`
 * per namespace, as Slurm or Kubernetes would start them. Node 0's launcher hosts the
 * rendezvous; the 4 ranks get the whole environment contract and run allreduces over the veth
 * network. A rank that fails on either node stops the ranks of both, and both launchers print
 * the same first-failure report and exit with its code, leaving no process behind. Skips,
 * saying why, where namespaces cannot be created.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { createNet, type Net } from './fixtures/netns.js';
import { assertNoneRunning, cleanEnv, cleanUp, kBin, kFailureJob, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-per-node-');
const net = createNet(2, dir);
const dirs: string[] = [dir];
after(() => {
  if ('destroy' in net) net.destroy();
  for (const d of dirs) cleanUp(d);
});

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts the launcher of node `node` in its namespace (through the fixture's ssh-like script). */
function launcher(node: number, env: NodeJS.ProcessEnv, extra: string[] = []): { child: ChildProcess; ended: Promise<Ended> } {
  const { hosts, ssh } = net as Net;
  const argv = [
    process.execPath,
    kBin,
    '--nnodes',
    '2',
    '--node-rank',
    String(node),
    '--nproc-per-node',
    '2',
    '--rdzv-endpoint',
    `${hosts[0]}:29400`,
    '--start-timeout',
    '15s',
    ...extra,
    process.execPath,
    kFailureJob,
  ];
  const child = spawn(ssh, [hosts[node] as string, `exec ${argv.map((a) => `'${a}'`).join(' ')}`], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const limit = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const ended = new Promise<Ended>((resolve) => {
    child.once('close', (code) => {
      clearTimeout(limit);
      resolve({ code, stdout, stderr });
    });
  });
  return { child, ended };
}

function identities(stdout: string): number[][] {
  return stdout
    .split('\n')
    .map((line) => /^\[\d+\] (\{"rank".*\})$/.exec(line)?.[1])
    .filter((json): json is string => json !== undefined)
    .map((json) => {
      const i = JSON.parse(json) as Record<string, number>;
      return [i.rank, i.size, i.localRank, i.localSize, i.crossRank, i.crossSize] as number[];
    });
}

/** Runs both nodes' launchers with `env` and returns what each printed. */
async function runBoth(env: Record<string, string>, jobDir: string): Promise<[Ended, Ended]> {
  const all = cleanEnv({ DIR: jobDir, MODE: 'loop', ...env });
  // Node 1 first: its launcher waits for node 0's endpoint (as a pod that starts first does).
  const node1 = launcher(1, all);
  const node0 = launcher(0, all);
  return Promise.all([node0.ended, node1.ended]);
}

const skip = 'skip' in net ? net.skip : false;

describe('ringrun per node, across network namespaces', { skip, timeout: 120_000 }, () => {
  it('2 nodes x 2 ranks: every rank gets its rank, local and cross values; both launchers exit 0', {
    timeout: 45_000,
  }, async () => {
    const jobDir = tempDir('ringrun-per-node-ok-');
    dirs.push(jobDir);
    const [node0, node1] = await runBoth({ ITERATIONS: '5', RINGREDUCE_SECRET: 'a-secret-shared-by-both-nodes' }, jobDir);
    assert.equal(node0.code, 0, `node 0:\n${node0.stdout}\n${node0.stderr}`);
    assert.equal(node1.code, 0, `node 1:\n${node1.stdout}\n${node1.stderr}`);
    assert.deepEqual(
      [...identities(node0.stdout), ...identities(node1.stdout)].sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0)),
      [
        [0, 4, 0, 2, 0, 2],
        [1, 4, 1, 2, 0, 2],
        [2, 4, 0, 2, 1, 2],
        [3, 4, 1, 2, 1, 2],
      ],
    );
    assert.equal(node0.stdout.split('\n').filter((l) => /^\[[01]\] done$/.test(l)).length, 2, node0.stdout);
    assert.equal(node1.stdout.split('\n').filter((l) => /^\[[23]\] done$/.test(l)).length, 2, node1.stdout);
    assertNoneRunning(jobDir, 4);
  });

  for (const [failing, node] of [
    [3, 1],
    [0, 0],
  ] as const) {
    it(`a rank failing on node ${node} stops both nodes, which report it alike and exit with its code`, {
      timeout: 45_000,
    }, async () => {
      const jobDir = tempDir('ringrun-per-node-fail-');
      dirs.push(jobDir);
      // No RINGREDUCE_SECRET: node 0 makes the ranks' secret (and warns).
      const [node0, node1] = await runBoth({ FAIL_RANK: String(failing), FAIL_AT: '3', FAIL_CODE: '7' }, jobDir);
      const report = new RegExp(
        `ringrun: job failed: rank ${failing} \\(pid \\d+\\) on node ${node} \\(.*\\) exited with code 7\\n`,
      );
      for (const [i, ended] of [node0, node1].entries()) {
        assert.equal(ended.code, 7, `node ${i}:\n${ended.stdout}\n${ended.stderr}`);
        assert.match(ended.stderr, report, `node ${i}`);
      }
      const other = node === 0 ? node1 : node0;
      assert.match(other.stderr, new RegExp(`ringrun: the job failed on another node: rank ${failing} .* on node ${node}`));
      const firstLine = (text: string) => report.exec(text)?.[0];
      assert.equal(firstLine(node0.stderr), firstLine(node1.stderr), 'the same report on both nodes');
      assert.match(node0.stderr, /RINGREDUCE_SECRET is not set/);
      assertNoneRunning(jobDir, 4);
    });
  }
});
