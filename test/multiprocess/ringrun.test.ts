/**
 * ringrun end to end: the compiled CLI (`node bin/ringrun.js`) starting real processes.
 * Ranks write their pids to a temp dir so the tests can check that none is left behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const kBin = fileURLToPath(new URL('../../../bin/ringrun.js', import.meta.url));
/** Longest any single ringrun run may take before the test kills it and fails. */
const kRunLimitMs = 20_000;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** When ringrun exited, by Date.now(). */
  endedAt: number;
}

/** The environment without any RINGREDUCE_* of the machine running the tests. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RINGREDUCE_')));
  return { ...env, ...extra };
}

/** Starts ringrun; `onStart` may poke it (signals) while it runs. */
async function ringrun(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; onStart?: (pid: number) => Promise<void> } = {},
): Promise<Run> {
  const child = spawn(process.execPath, [kBin, ...args], { env: options.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const limit = setTimeout(() => child.kill('SIGKILL'), kRunLimitMs);
  const closed = new Promise<Run>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr, endedAt: Date.now() }));
  });
  try {
    if (options.onStart !== undefined && child.pid !== undefined) await options.onStart(child.pid);
    const run = await closed;
    assert.notEqual(run.signal, 'SIGKILL', `ringrun ran past ${kRunLimitMs} ms\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    return run;
  } finally {
    clearTimeout(limit);
  }
}

/** Whether a process runs; a zombie counts as gone (PID 1 may never reap orphans). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    if (process.platform === 'linux') return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids the ranks wrote to `dir`, one file per process. */
function pidsIn(dir: string): number[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.pid'))
    .map((name) => Number(readFileSync(join(dir, name), 'utf8').trim()))
    .filter((pid) => pid > 0);
}

async function waitFor(what: string, predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

function assertNoneRunning(pids: number[]): void {
  assert.ok(pids.length > 0, 'no pids were recorded');
  assert.deepEqual(
    pids.filter((pid) => running(pid)),
    [],
    'processes left running',
  );
}

/**
 * A shell rank that starts a grandchild (sleep), records both pids and waits: `kill -TERM`
 * of the shell alone would leave the sleep behind; only a process-group kill stops both.
 */
function shellRank(beforeWait = ''): string {
  return `sleep 60 & echo $! > "$DIR/gc.$RINGREDUCE_RANK.pid"; echo $$ > "$DIR/sh.$RINGREDUCE_RANK.pid"; echo ready; ${beforeWait} wait`;
}

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ringrun-test-'));
  dirs.push(dir);
  return dir;
}

after(() => {
  // Whatever a failed test left behind.
  for (const dir of dirs) {
    for (const pid of pidsIn(dir)) if (running(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('ringrun', { timeout: 120_000 }, () => {
  it('gives every rank the environment contract and prefixes its output', { timeout: 30_000 }, async () => {
    const script = `
      const e = process.env;
      const keys = Object.keys(e).filter((k) => k.startsWith('RINGREDUCE_'));
      console.log(JSON.stringify({ env: Object.fromEntries(keys.map((k) => [k, e[k]])), argv: process.argv.slice(1) }));
      console.error('to stderr');
      process.stdout.write('no newline');`;
    const run = await ringrun(
      ['-np', '3', '--log-level', 'info', '--stall-timeout', '2s', 'node', '-e', script, '--', '-np', '7', '--verbose'],
      {
        env: cleanEnv({ RINGREDUCE_IO_TIMEOUT_MS: '1234' }),
      },
    );
    assert.equal(run.code, 0, run.stderr);

    const reports = run.stdout
      .split('\n')
      .filter((line) => line.includes('{'))
      .map((line) => {
        const match = /^\[(\d+)\] (\{.*\})$/.exec(line);
        assert.ok(match, `unprefixed line: ${line}`);
        return { prefix: Number(match[1]), ...(JSON.parse(match[2] ?? '') as { env: Record<string, string>; argv: string[] }) };
      });
    assert.deepEqual(reports.map((r) => Number(r.env.RINGREDUCE_RANK)).sort(), [0, 1, 2]);
    const first = reports[0]?.env ?? {};
    assert.match(first.RINGREDUCE_STORE_ADDR ?? '', /^127\.0\.0\.1:\d+$/);
    assert.match(first.RINGREDUCE_JOB_ID ?? '', /^[0-9a-f]{16}$/);
    assert.match(first.RINGREDUCE_SECRET ?? '', /^[0-9a-f]{64}$/);
    // The secret reaches the ranks through their environment only: never the output of ringrun.
    assert.ok(!run.stderr.includes(first.RINGREDUCE_SECRET ?? '-'), 'the secret leaked into ringrun output');
    for (const { prefix, env, argv } of reports) {
      assert.deepEqual(env, {
        RINGREDUCE_RANK: String(prefix),
        RINGREDUCE_SIZE: '3',
        RINGREDUCE_LOCAL_RANK: String(prefix),
        RINGREDUCE_LOCAL_SIZE: '3',
        RINGREDUCE_CROSS_RANK: '0',
        RINGREDUCE_CROSS_SIZE: '1',
        RINGREDUCE_STORE_ADDR: first.RINGREDUCE_STORE_ADDR,
        RINGREDUCE_ADDRESS: '127.0.0.1',
        RINGREDUCE_JOB_ID: first.RINGREDUCE_JOB_ID,
        RINGREDUCE_SECRET: first.RINGREDUCE_SECRET,
        RINGREDUCE_STALL_TIMEOUT_MS: '2000',
        RINGREDUCE_LOG_LEVEL: 'info',
        RINGREDUCE_IO_TIMEOUT_MS: '1234', // inherited: no flag overrode it
      });
      // The command's own flags reached it; node itself consumes the '--'.
      assert.deepEqual(argv, ['-np', '7', '--verbose']);
    }
    for (const rank of [0, 1, 2]) {
      assert.ok(run.stdout.includes(`[${rank}] no newline\n`), `rank ${rank}'s last partial line`);
      assert.ok(run.stderr.includes(`[${rank}] to stderr\n`), `rank ${rank}'s stderr`);
      assert.ok(!run.stdout.includes('to stderr'));
    }
  });

  it('fails fast: a rank that exits 3 stops the others and is reported', { timeout: 30_000 }, async () => {
    const dir = tempDir();
    const script = `
      const fs = require('node:fs');
      const rank = process.env.RINGREDUCE_RANK;
      fs.writeFileSync(process.env.DIR + '/rank.' + rank + '.pid', String(process.pid));
      if (rank === '1') {
        // Fail only once every rank runs, so the others really have to be killed.
        const t = setInterval(() => {
          if (fs.readdirSync(process.env.DIR).length < 3) return;
          clearInterval(t);
          for (let i = 1; i <= 12; i++) console.log('line ' + i);
          console.error('about to fail');
          process.exit(3);
        }, 20);
      } else {
        setTimeout(() => {}, 60_000);
      }`;
    const run = await ringrun(['-np', '3', 'node', '-e', script], { env: cleanEnv({ DIR: dir }) });

    assert.equal(run.code, 3, run.stderr);
    assert.match(run.stderr, /ringrun: rank 1 exited with code 3; stopping the other 2 ranks/);
    assert.match(run.stderr, /ringrun: job failed: rank 1 \(pid \d+\) exited with code 3/);
    // The report ends with the last 10 lines of rank 1 (stdout and stderr may arrive in either order).
    const report = run.stderr.split('last 10 lines of rank 1:\n')[1]?.trimEnd().split('\n') ?? [];
    assert.equal(report.length, 10, run.stderr);
    for (const line of report) assert.match(line, /^ringrun: {3}\[1\] (line (\d+)|about to fail)$/);
    assert.ok(report.includes('ringrun:   [1] line 12'));
    assert.ok(!report.includes('ringrun:   [1] line 2'));
    // SIGTERM sufficed: nothing waited for the 3 s grace period.
    assert.doesNotMatch(run.stderr, /SIGKILL/);
    assertNoneRunning(pidsIn(dir));
  });

  it("kills a failed job's grandchildren too (sh -c wrappers and what they started)", { timeout: 30_000 }, async () => {
    const dir = tempDir();
    const fail = `if [ "$RINGREDUCE_RANK" = 2 ]; then while [ $(ls "$DIR" | wc -l) -lt 6 ]; do sleep 0.05; done; echo bye; exit 5; fi;`;
    const started = Date.now();
    const run = await ringrun(['-np', '3', 'sh', '-c', shellRank(fail)], { env: cleanEnv({ DIR: dir }) });

    assert.equal(run.code, 5, run.stderr);
    assert.match(
      run.stderr,
      /job failed: rank 2 \(pid \d+\) exited with code 5\nringrun: last 2 lines of rank 2:\n.*\[2\] ready\n.*\[2\] bye\n/,
    );
    // SIGTERM to the groups sufficed (no SIGKILL after the grace period); the bound is loose for loaded CI.
    assert.doesNotMatch(run.stderr, /SIGKILL/);
    assert.ok(run.endedAt - started < 10_000, `took ${run.endedAt - started} ms`);
    assert.equal(pidsIn(dir).length, 6);
    assertNoneRunning(pidsIn(dir));
  });

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`stops every rank and exits ${code} on ${signal}`, { timeout: 30_000 }, async () => {
      const dir = tempDir();
      let signalledAt = 0;
      const run = await ringrun(['-np', '3', 'sh', '-c', shellRank()], {
        env: cleanEnv({ DIR: dir }),
        onStart: async (pid) => {
          await waitFor('every rank to start', () => pidsIn(dir).length === 6);
          signalledAt = Date.now();
          process.kill(pid, signal);
        },
      });

      assert.equal(run.code, code, run.stderr);
      assert.match(run.stderr, new RegExp(`received ${signal}: stopping 3 ranks`));
      assert.doesNotMatch(run.stderr, /SIGKILL/); // every process ended within the grace period
      assert.ok(run.endedAt - signalledAt < 3_000, `took ${run.endedAt - signalledAt} ms after ${signal}`);
      assert.equal(run.stdout.match(/^\[\d\] ready$/gm)?.length, 3);
      assertNoneRunning(pidsIn(dir));
    });
  }

  it('exits 127 and says so when the command does not exist', { timeout: 30_000 }, async () => {
    const run = await ringrun(['-np', '2', 'ringrun-no-such-command']);
    assert.equal(run.code, 127);
    assert.match(run.stderr, /job failed: rank 0 could not be started: spawn ringrun-no-such-command ENOENT/);
  });

  it('says to start a script with node when the command is a .js or .ts file', { timeout: 30_000 }, async () => {
    const js = await ringrun(['-np', '2', 'ringrun-no-such-script.js']);
    assert.equal(js.code, 127);
    assert.match(
      js.stderr,
      /job failed: rank 0 could not be started: spawn ringrun-no-such-script\.js ENOENT \(ringrun-no-such-script\.js is a script: start it with node, as in 'ringrun -np N node ringrun-no-such-script\.js'\)/,
    );
    const ts = await ringrun(['-np', '1', 'ringrun-no-such-script.mts']);
    assert.match(
      ts.stderr,
      /is TypeScript: compile it, e\.g\. with npx tsc, and start the \.js with node, as in 'ringrun -np N node ringrun-no-such-script\.mjs'/,
    );
  });

  it('exits 2 on a usage error, naming the flag', { timeout: 30_000 }, async () => {
    const run = await ringrun(['-np', 'two', 'node']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /^ringrun: -np must be a positive integer, got 'two'\n/);
  });

  it("also writes each rank's output to --output-dir", { timeout: 30_000 }, async () => {
    const dir = tempDir();
    const run = await ringrun([
      '-np',
      '2',
      '--output-dir',
      join(dir, 'logs'),
      'sh',
      '-c',
      'echo "out $RINGREDUCE_RANK"; echo err >&2',
    ]);
    assert.equal(run.code, 0, run.stderr);
    for (const rank of [0, 1]) {
      const lines = readFileSync(join(dir, 'logs', `rank.${rank}.log`), 'utf8')
        .split('\n')
        .sort();
      assert.deepEqual(lines, ['', 'err', `out ${rank}`]);
      assert.ok(run.stdout.includes(`[${rank}] out ${rank}\n`));
    }
  });
});
