/**
 * Elastic training with real processes (ringrun --elastic): a rank SIGKILLed mid-training (a
 * middle one, then rank 0) leaves and the survivors finish with identical values that equal the
 * ones the membership history implies; a discovery script that offers a slot grows the job at a
 * commit; falling below --min-np fails the job with a report; --max-restarts starts a failed
 * job again and gives up after K attempts.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { elasticReports, expectedValue } from './fixtures/elastic_reports.js';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kJob = fileURLToPath(new URL('./fixtures/elastic_job.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringreduce-elastic-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function elastic(args: string[], env: Record<string, string>, limitMs = 60_000) {
  const run = new RingrunRun(['--elastic', ...args, 'node', kJob], cleanEnv(env), limitMs);
  return { run, finished: await run.finished };
}

for (const victim of ['w1', 'w0']) {
  test(`4 ranks, worker ${victim} (rank ${victim.slice(1)}) SIGKILLed at step 10: 3 ranks finish with the values the history implies`, async () => {
    const killedAt = join(dir, `killed-${victim}`);
    const { run, finished } = await elastic(['--min-np', '2', '--max-np', '4', '-np', '4'], {
      VICTIM: victim,
      KILL_AT: '10',
      KILLED_AT_FILE: killedAt,
    });
    assert.equal(finished.code, 0, run.stderr);
    assert.match(
      run.stderr,
      new RegExp(`worker ${victim} \\(rank ${victim.slice(1)} of generation 1\\) was killed by SIGKILL; 3 left`),
    );
    const done = elasticReports(finished.stdout);
    assert.deepEqual(
      done.map((r) => r.rank),
      [0, 1, 2],
    );
    for (const report of done) {
      assert.equal(report.size, 3);
      assert.equal(report.generation, 2);
      assert.equal(report.resets, 1);
      assert.deepEqual(report.sizes, done[0]?.sizes, 'every rank has the same history');
      assert.deepEqual(report.value, done[0]?.value, 'every rank has the same values');
    }
    const sizes = done[0]?.sizes ?? [];
    // Steps 0..9 committed with 4 ranks; the step that failed is redone with 3.
    assert.deepEqual(sizes, [...new Array(10).fill(4), ...new Array(20).fill(3)]);
    assert.deepEqual(done[0]?.value, expectedValue(sizes));
    const recovery = Math.max(...done.map((r) => r.recoveredAt[0] ?? Number.NaN)) - Number(readFileSync(killedAt, 'utf8'));
    assert.ok(recovery < 3000, `recovered in ${recovery} ms`);
  });
}

test('a discovery script that offers a fifth slot grows the job at a commit; the new rank starts from the others values', async () => {
  const grow = join(dir, 'grow');
  const committed = join(dir, 'committed');
  const script = join(dir, 'discover.sh');
  writeFileSync(script, `#!/bin/sh\nif [ -f ${grow} ]; then echo localhost:5; else echo localhost:4; fi\n`, { mode: 0o755 });
  const run = new RingrunRun(
    [
      '--elastic',
      '--min-np',
      '2',
      '--max-np',
      '5',
      '--host-discovery-script',
      script,
      '--discovery-interval',
      '200ms',
      '-np',
      '4',
      'node',
      kJob,
    ],
    // Steps enough for a newcomer to start and join on a loaded machine before the loop ends.
    cleanEnv({ STEP_MS: '40', STEPS: '100', COMMITTED_FILE: committed }),
    60_000,
  );
  // Grow once the job is in its loop (a step committed with 4 ranks), however slow its start.
  const deadline = performance.now() + 30_000;
  while (!existsSync(committed) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(existsSync(committed), 'the job committed a step within 30 s');
  writeFileSync(grow, '');
  const finished = await run.finished;
  assert.equal(finished.code, 0, run.stderr);
  assert.match(run.stderr, /1 new slot: 4 -> 5 workers/);
  const done = elasticReports(finished.stdout);
  assert.equal(done.length, 5);
  const sizes = done[0]?.sizes ?? [];
  assert.ok(sizes.includes(4) && sizes.includes(5), `history ${sizes.join('')}`);
  assert.deepEqual(sizes, [...sizes].sort(), 'the job grew once, from 4 to 5');
  for (const report of done) {
    assert.equal(report.size, 5);
    assert.deepEqual(report.sizes, sizes, `${report.worker} has the same history, the newcomer included`);
    assert.deepEqual(report.value, expectedValue(sizes));
  }
  assert.equal(done.find((r) => r.worker === 'w4')?.rank, 4, 'the new worker comes last');
});

test('below --min-np for longer than --elastic-timeout, the job fails with a report', async () => {
  const started = performance.now();
  const { run, finished } = await elastic(['--min-np', '2', '--elastic-timeout', '1500ms', '-np', '2'], {
    VICTIM: 'w1',
    KILL_AT: '3',
  });
  assert.equal(finished.code, 1);
  assert.match(run.stderr, /1 worker left, below --min-np 2, and no slot came within 1500 ms: the job fails/);
  assert.ok(performance.now() - started < 15_000);
});

test('--max-restarts starts a failed job again with RINGREDUCE_RESTART_ATTEMPT, and gives up after K restarts', async () => {
  const script = join(dir, 'restart_job.mjs');
  // Rank 1 fails on the first two attempts.
  writeFileSync(
    script,
    `const attempt = Number(process.env.RINGREDUCE_RESTART_ATTEMPT);
     const rr = await import(${JSON.stringify(fileURLToPath(new URL('../../src/index.js', import.meta.url)))});
     await rr.init();
     if (attempt < 2 && rr.rank() === 1) process.exit(3);
     const sum = await rr.allreduce(new Float64Array([1]));
     console.log('ATTEMPT', attempt, 'RANK', rr.rank(), 'SUM', sum[0]);
     await rr.shutdown();`,
  );
  const enough = new RingrunRun(['--max-restarts', '2', '-np', '2', 'node', script], cleanEnv(), 60_000);
  const ok = await enough.finished;
  assert.equal(ok.code, 0, enough.stderr);
  assert.match(enough.stderr, /starting it again, attempt 1 of 2 restarts/);
  assert.match(enough.stderr, /starting it again, attempt 2 of 2 restarts/);
  assert.match(ok.stdout, /ATTEMPT 2 RANK 0 SUM 2/);
  const few = new RingrunRun(['--max-restarts', '1', '-np', '2', 'node', script], cleanEnv(), 60_000);
  const failed = await few.finished;
  // The first failure ringrun sees: rank 1's exit 3, or rank 0's 1 after it lost rank 1.
  assert.ok(failed.code === 3 || failed.code === 1, `exit ${failed.code}`);
  assert.match(few.stderr, /the job failed 2 times \(--max-restarts 1\): giving up/);
});
