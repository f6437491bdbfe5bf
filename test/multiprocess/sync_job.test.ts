/** The synchronous API and background progress, in real processes started by ringrun. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

const kSize = 3;

test('sync collectives give the right results in every process, and engines progress while callers block', () => {
  const run = spawnSync(
    process.execPath,
    ['bin/ringrun.js', '-np', String(kSize), process.execPath, 'dist/test/multiprocess/fixtures/sync_job.js'],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  assert.equal(run.status, 0, `ringrun failed:\n${run.stdout}\n${run.stderr}`);
  const reports = run.stdout
    .split('\n')
    .map((line) => /^\[(\d+)\]\s?(\{.*\})$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => JSON.parse(m[2] as string));
  assert.equal(reports.length, kSize, run.stdout);
  const expectedGather = Array.from({ length: kSize }, (_, r) => Array(r).fill(r)).flat();
  for (const report of reports) {
    assert.deepEqual(report.sum, [1 + 2 + 3, 30]);
    assert.equal(report.avg, 1);
    assert.equal(report.big, (3n * 2n ** 60n + 3n).toString());
    assert.deepEqual(report.gathered, { shape: [expectedGather.length], data: expectedGather });
    assert.deepEqual(report.bcast, [kSize - 1, kSize - 1]);
    assert.equal(report.busyOk, true);
    const left = (report.rank + kSize - 1) % kSize;
    assert.deepEqual(report.ring, { from: left, data: [left] });
    if (report.rank !== 0)
      assert.ok(report.elapsedMs < 2500, `rank ${report.rank} waited ${report.elapsedMs} ms for a blocked rank 0`);
  }
});
