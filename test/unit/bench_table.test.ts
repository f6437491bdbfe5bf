/**
 * The bench's report merge: the slowest rank's mean and median make the row, bandwidths follow
 * nccl-tests' bus factors, and a wrong result on any rank marks the row.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BenchReport } from '../../bench/spec.js';
import { busFactor, formatTable, mergeReports } from '../../bench/table.js';

const row = (timeUs: number, medianUs: number, ok: boolean | null) => ({
  op: 'allreduce' as const,
  bytes: 1 << 20,
  count: 1 << 18,
  iterations: 10,
  timeUs,
  medianUs,
  ok,
  maxRssBytes: 100 << 20,
});

test('bus factors: allreduce 2(n-1)/n, allgather (n-1)/n, broadcast 1', () => {
  assert.equal(busFactor('allreduce', 4), 1.5);
  assert.equal(busFactor('allgather', 4), 0.75);
  assert.equal(busFactor('broadcast', 4), 1);
  assert.equal(busFactor('allreduce', 1), 1);
});

test('a row takes the slowest rank, and is wrong if any rank is', () => {
  const reports: BenchReport[] = [
    { rank: 0, size: 4, rows: [row(1000, 800, true)], idleCpuMs: 1 },
    { rank: 1, size: 4, rows: [row(2000, 700, false)], idleCpuMs: 1 },
  ];
  const [merged] = mergeReports(reports);
  assert.ok(merged);
  assert.equal(merged.timeUs, 2000);
  assert.equal(merged.medianUs, 800);
  assert.equal(merged.ok, false);
  assert.ok(Math.abs(merged.algbwGBs - (1 << 20) / 2e-3 / 1e9) < 1e-12);
  assert.ok(Math.abs(merged.busbwGBs - merged.algbwGBs * 1.5) < 1e-12);
  const table = formatTable([merged], 'float32');
  assert.match(table, /# allreduce, 4 ranks/);
  assert.match(table, /1 MiB\s+262144\s+float32\s+10\s+2000\s+800\s+0\.524\s+0\.786\s+WRONG\s+100/);
});
