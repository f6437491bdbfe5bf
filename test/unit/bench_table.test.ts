/**
 * The bench's report merge: the slowest rank's mean and median make the row, bandwidths follow
 * nccl-tests' bus factors, and a wrong result on any rank marks the row.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type BenchReport, kBenchOps } from '../../bench/spec.js';
import { busFactor, formatTable, mergeReports } from '../../bench/table.js';

const row = (timeUs: number, medianUs: number, ok: boolean | null) => ({
  op: 'allreduce' as const,
  bytes: 1 << 20,
  count: 1 << 18,
  iterations: 10,
  timeUs,
  medianUs,
  cpuUs: medianUs / 2,
  ok,
  maxRssBytes: 100 << 20,
});

test('bus factors: allreduce 2(n-1)/n; allgather, reducescatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce 1', () => {
  assert.equal(busFactor('allreduce', 4), 1.5);
  assert.equal(busFactor('allgather', 4), 0.75);
  assert.equal(busFactor('broadcast', 4), 1);
  assert.equal(busFactor('reducescatter', 4), 0.75);
  assert.equal(busFactor('reducescatter', 2), 0.5);
  assert.equal(busFactor('alltoall', 4), 0.75);
  assert.equal(busFactor('reduce', 4), 1);
  assert.equal(busFactor('gather', 4), 0.75);
  assert.equal(busFactor('scatter', 8), 0.875);
  for (const op of kBenchOps) assert.equal(busFactor(op, 1), 1, op);
});

test('a row takes the slowest rank, and is wrong if any rank is', () => {
  const reports: BenchReport[] = [
    { rank: 0, size: 4, rows: [{ ...row(1000, 800, true), warmup: 40, warmupUs: 3100 }], idleCpuMs: 1 },
    { rank: 1, size: 4, rows: [{ ...row(2000, 700, false), cpuUs: 900, warmup: 40, warmupUs: 2900 }], idleCpuMs: 1 },
  ];
  const [merged] = mergeReports(reports);
  assert.ok(merged);
  assert.equal(merged.timeUs, 2000);
  assert.equal(merged.medianUs, 800);
  assert.equal(merged.cpuUs, 900);
  assert.equal(merged.warmupUs, 3100);
  assert.equal(merged.ok, false);
  assert.ok(Math.abs(merged.algbwGBs - (1 << 20) / 2e-3 / 1e9) < 1e-12);
  assert.ok(Math.abs(merged.busbwGBs - merged.algbwGBs * 1.5) < 1e-12);
  const table = formatTable([merged], 'float32');
  assert.match(table, /# allreduce, 4 ranks/);
  assert.match(table, /1 MiB\s+262144\s+float32\s+10\s+2000\s+800\s+900\s+3100\s+0\.524\s+0\.786\s+WRONG\s+100/);
  // A row without a warm-up (an older report) shows none.
  const [cold] = mergeReports(reports.map((r) => ({ ...r, rows: r.rows.map(({ warmup, warmupUs, ...rest }) => rest) })));
  assert.match(formatTable([cold as typeof merged], 'float32'), /900\s+-\s+0\.524/);
});

test('the new ops get their own section and factor', () => {
  const reports: BenchReport[] = [0, 1].map((rank) => ({
    rank,
    size: 2,
    rows: [
      { ...row(1000, 1000, true), op: 'allreduce' as const },
      { ...row(1000, 1000, true), op: 'reducescatter' as const },
    ],
    idleCpuMs: 1,
  }));
  const [allreduce, reducescatter] = mergeReports(reports);
  assert.ok(allreduce && reducescatter);
  assert.equal(reducescatter.algbwGBs, allreduce.algbwGBs);
  assert.ok(Math.abs(reducescatter.busbwGBs - allreduce.busbwGBs / 2) < 1e-12);
  const table = formatTable([allreduce, reducescatter], 'float32');
  assert.match(table, /# allreduce, 2 ranks[\s\S]*# reducescatter, 2 ranks/);
});
