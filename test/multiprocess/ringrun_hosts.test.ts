/**
 * ringrun with -H and the ssh path, through a local ssh-like command (--ssh-command) that runs
 * the remote command here: 127.0.0.2 is "another host" to ringrun. Covers what reaches a
 * remote rank (the contract, the secret, -x; not the rest of ringrun's environment, never the
 * secret on a command line), a real job across local and remote ranks, stopping remote ranks
 * on Ctrl-C, the start-up timeout, ssh failures, and --backend mpi.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { assertNoneRunning, cleanEnv, cleanUp, pidsIn, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-hosts-');
after(() => cleanUp(dir));

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/**
 * ssh-like: [options] host command. Records its argv, then runs the command here in a fresh
 * environment, as sshd would after a login: the rank sees only what came over stdin.
 */
const fakeSsh = script(
  'fake-ssh',
  `printf '%s\\n' "$*" >> "${dir}/ssh-argv"\nwhile [ $# -gt 2 ]; do shift; done\nexec env -i PATH="$PATH" HOME="$HOME" sh -c "$2"`,
);

describe('ringrun across hosts', { timeout: 90_000 }, () => {
  it('gives remote ranks the contract, the secret and -x variables over stdin, nothing on a command line', async () => {
    const print = `
      const keys = Object.keys(process.env).filter((k) => k.startsWith('RINGREDUCE_') || k === 'FOO' || k === 'ONLY_HERE' || k === 'FWD');
      console.log(JSON.stringify({ cwd: process.cwd(), env: Object.fromEntries(keys.map((k) => [k, process.env[k]])) }));`;
    const run = new RingrunRun(
      ['-H', 'localhost:1,127.0.0.2:2', '--ssh-command', fakeSsh, '-x', 'FOO=bar', '-x', 'FWD', process.execPath, '-e', print],
      cleanEnv({ ONLY_HERE: 'launcher', FWD: 'forwarded' }),
    );
    const result = await run.finished;
    assert.equal(result.code, 0, result.stderr);
    const reports = result.stdout
      .split('\n')
      .filter((line) => line.includes('{'))
      .map((line) => JSON.parse(line.replace(/^\[\d\] /, '')) as { cwd: string; env: Record<string, string> })
      .sort((a, b) => Number(a.env.RINGREDUCE_RANK) - Number(b.env.RINGREDUCE_RANK));
    assert.equal(reports.length, 3, result.stdout);
    const [local, ...remote] = reports as [(typeof reports)[0], ...typeof reports];
    assert.deepEqual(
      reports.map(({ env }) => [
        env.RINGREDUCE_LOCAL_RANK,
        env.RINGREDUCE_LOCAL_SIZE,
        env.RINGREDUCE_CROSS_RANK,
        env.RINGREDUCE_CROSS_SIZE,
      ]),
      [
        ['0', '1', '0', '2'],
        ['0', '2', '1', '2'],
        ['1', '2', '1', '2'],
      ],
    );
    for (const { env, cwd } of reports) {
      assert.equal(env.RINGREDUCE_SECRET, local.env.RINGREDUCE_SECRET);
      assert.equal(env.RINGREDUCE_STORE_ADDR, local.env.RINGREDUCE_STORE_ADDR);
      assert.equal(env.RINGREDUCE_ADDRESS, undefined, 'a multi-host rank chooses its own address');
      assert.equal(env.FOO, 'bar');
      assert.equal(env.FWD, 'forwarded');
      assert.equal(cwd, process.cwd());
    }
    assert.equal(local.env.ONLY_HERE, 'launcher');
    for (const { env } of remote) assert.equal(env.ONLY_HERE, undefined, 'a remote rank got the launcher environment');
    assert.match(local.env.RINGREDUCE_SECRET ?? '', /^[0-9a-f]{64}$/);
    // The ssh command lines: the fixed bootstrap, the host, nothing of the job.
    const argvs = execFileSync('cat', [join(dir, 'ssh-argv')], { encoding: 'utf8' })
      .trim()
      .split('\n');
    assert.equal(argvs.length, 2);
    for (const argv of argvs) {
      assert.match(argv, /^127\.0\.0\.2 sh -c 'IFS= read -r M/);
      assert.ok(!argv.includes(local.env.RINGREDUCE_SECRET as string) && !argv.includes('FOO'));
    }
    assert.doesNotMatch(result.stdout + result.stderr, /ringrun-started-/);
  });

  it('runs collectives across local and remote ranks', async () => {
    const run = new RingrunRun(
      [
        '-H',
        'localhost:1,127.0.0.2:2',
        '--ssh-command',
        fakeSsh,
        process.execPath,
        'dist/test/multiprocess/fixtures/sync_job.js',
      ],
      cleanEnv(),
    );
    const result = await run.finished;
    assert.equal(result.code, 0, result.stderr);
    const sums = result.stdout.match(/"sum":\[6,30\]/g) ?? [];
    assert.equal(sums.length, 3, result.stdout);
  });

  it('stops remote ranks and what they started on SIGINT', async () => {
    const rank = `sleep 60 & echo $! > "${dir}/gc.$RINGREDUCE_RANK.pid"; echo $$ > "${dir}/sh.$RINGREDUCE_RANK.pid"; echo ready; wait`;
    const run = new RingrunRun(['-H', '127.0.0.2:2', '--ssh-command', fakeSsh, 'sh', '-c', rank], cleanEnv());
    await run.waitFor('both ranks', (r) => r.count('ready') === 2 && pidsIn(dir).length === 4);
    const signalledAt = Date.now();
    run.child.kill('SIGINT');
    const result = await run.finished;
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /received SIGINT: stopping 2 ranks/);
    assert.doesNotMatch(result.stderr, /SIGKILL/);
    assert.ok(result.endedAt - signalledAt < 3000, `took ${result.endedAt - signalledAt} ms`);
    assertNoneRunning(dir, 4);
  });

  it('fails ranks that do not start in time, and reports an ssh failure', async () => {
    // Never starts the bootstrap; like ssh, it ends when its stdin does.
    const hang = script('hanging-ssh', 'echo "connecting to $(( $# > 1 ))..." >&2; exec cat >/dev/null');
    const slow = await new RingrunRun(
      ['-H', 'localhost:1,10.255.255.1:1', '--ssh-command', hang, '--start-timeout', '1s', 'sleep', '30'],
      cleanEnv(),
    ).finished;
    assert.equal(slow.code, 124, slow.stderr);
    assert.match(slow.stderr, /ringrun: rank 1 did not start within 1000 ms \(--start-timeout\); stopping the job/);
    assert.match(
      slow.stderr,
      /job failed: rank 1 did not start within 1000 ms\nringrun: last 1 lines of rank 1 on 10\.255\.255\.1:\n.*\[1\] connecting to 1\.\.\./,
    );

    const refused = script('refused-ssh', 'echo "ssh: connect to host $3 port 22: Connection refused" >&2; exit 255');
    const failed = await new RingrunRun(['-H', 'nodeX:1,nodeY:1', '--ssh-command', refused, 'true'], cleanEnv()).finished;
    assert.equal(failed.code, 255, failed.stderr);
    assert.match(failed.stderr, /job failed: rank \d \(pid \d+\) on node[XY] exited with code 255: ssh failed/);
  });

  it('runs mpirun for --backend mpi', async (t) => {
    try {
      execFileSync('mpirun', ['--version'], { stdio: 'ignore' });
    } catch {
      t.skip('mpirun is not installed');
      return;
    }
    const result = await new RingrunRun(
      ['--backend', 'mpi', '-np', '2', 'sh', '-c', 'echo "rank $OMPI_COMM_WORLD_RANK backend $RINGREDUCE_BACKEND"'],
      cleanEnv(),
    ).finished;
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(result.stdout.trim().split('\n').sort(), ['[0] rank 0 backend mpi', '[1] rank 1 backend mpi']);
  });

  it('--backend mpi prefixes each line with its rank and prints no colour codes into a pipe', async (t) => {
    try {
      execFileSync('mpirun', ['--version'], { stdio: 'ignore' });
    } catch {
      t.skip('mpirun is not installed');
      return;
    }
    // mpirun gives a rank's stdout a pseudo-terminal: Node would colour what console.log inspects.
    const script = 'console.log({ tty: process.stdout.isTTY === true, n: 1 }); console.error("to stderr")';
    const result = await new RingrunRun(['--backend', 'mpi', '-np', '2', 'node', '-e', script], cleanEnv()).finished;
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(result.stdout.trim().split('\n').sort(), ['[0] { tty: true, n: 1 }', '[1] { tty: true, n: 1 }']);
    assert.deepEqual(result.stderr.trim().split('\n').sort(), ['[0] to stderr', '[1] to stderr']);
  });
});
