/**
 * Merges the ranks' reports into rows (the slowest rank's time, as nccl-tests does) and prints
 * them in the nccl-tests layout, with the median iteration next to the mean (time) and the CPU
 * time a rank's process used per call (the largest of the ranks; near time, the job is CPU-bound)
 * and the mean time per call of the untimed warm-up before them (a cold start's cost).
 * algbw = bytes / time, bytes being the row's size (spec.ts); busbw = algbw × busFactor, the
 * share of the buffer that the busiest link must carry in an optimal algorithm, so that busbw is
 * comparable across rank counts, across ops and with the peers' (and nccl-tests') figures.
 */
import type { BenchOp, BenchReport } from './spec.js';

export interface ResultRow {
  op: BenchOp;
  ranks: number;
  bytes: number;
  count: number;
  iterations: number;
  timeUs: number;
  /** The slowest rank's median iteration time. */
  medianUs: number;
  /** The largest CPU time per call of any rank's process (see BenchRow.cpuUs). */
  cpuUs: number;
  /** The slowest rank's mean time per call of the untimed warm-up (BenchRow.warmupUs); 0 without one. */
  warmupUs: number;
  algbwGBs: number;
  busbwGBs: number;
  ok: boolean | null;
  /** Largest peak RSS of any rank, bytes. */
  maxRssBytes: number;
}

/**
 * nccl-tests' factors:
 * - allreduce 2(n-1)/n: each rank sends and receives (n-1)/n of the buffer twice (ring);
 * - allgather, reducescatter (n-1)/n: each rank receives (allgather) or sends (reducescatter)
 *   every part but its own;
 * - alltoall (n-1)/n: each rank sends all of its send buffer but the part it keeps;
 * - broadcast, reduce 1: the buffer must cross some link once whole (pipelined);
 * - gather, scatter (n-1)/n, as nccl-tests has them: the root must receive (gather) or send
 *   (scatter) every part but its own through its one link, so (n-1)/n of the buffer crosses
 *   the root's link whatever the algorithm (a tree or direct sends); busbw then reads as the
 *   bandwidth the root's link reached, as it does for allgather, whose every link carries the same.
 */
export function busFactor(op: BenchOp, n: number): number {
  if (n <= 1) return 1;
  switch (op) {
    case 'allreduce':
      return (2 * (n - 1)) / n;
    case 'allgather':
    case 'reducescatter':
    case 'alltoall':
    case 'gather':
    case 'scatter':
      return (n - 1) / n;
    case 'broadcast':
    case 'reduce':
      return 1;
  }
}

export function mergeReports(all: readonly BenchReport[]): ResultRow[] {
  // Ranks outside a measured process set ran nothing.
  const reports = all.filter((report) => report.member !== false);
  const first = reports[0];
  if (!first) return [];
  const n = first.size;
  return first.rows.map((row, i) => {
    let timeUs = 0;
    let medianUs = 0;
    let cpuUs = 0;
    let warmupUs = 0;
    let ok: boolean | null = row.ok;
    let maxRssBytes = 0;
    for (const report of reports) {
      const r = report.rows[i];
      if (!r) throw new Error(`rank ${report.rank} has no row ${i}`);
      timeUs = Math.max(timeUs, r.timeUs);
      medianUs = Math.max(medianUs, r.medianUs);
      cpuUs = Math.max(cpuUs, r.cpuUs);
      warmupUs = Math.max(warmupUs, r.warmupUs ?? 0);
      if (r.ok !== null) ok = (ok ?? true) && r.ok;
      maxRssBytes = Math.max(maxRssBytes, r.maxRssBytes);
    }
    const algbwGBs = row.bytes / (timeUs * 1e-6) / 1e9;
    return {
      ...row,
      ranks: n,
      timeUs,
      medianUs,
      cpuUs,
      warmupUs,
      ok,
      maxRssBytes,
      algbwGBs,
      busbwGBs: algbwGBs * busFactor(row.op, n),
    };
  });
}

function formatBytes(bytes: number): string {
  if (bytes >= 1 << 30 && bytes % (1 << 30) === 0) return `${bytes / (1 << 30)} GiB`;
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} B`;
}

export function formatTable(rows: readonly ResultRow[], dtype: string): string {
  const lines: string[] = [];
  const header = [
    'size',
    'count',
    'type',
    'iters',
    'time(us)',
    'p50(us)',
    'cpu(us)',
    'warm(us)',
    'algbw(GB/s)',
    'busbw(GB/s)',
    'check',
    'peakRSS(MiB)',
  ];
  const widths = [10, 11, 8, 6, 12, 10, 10, 10, 12, 12, 6, 13];
  const micros = (us: number) => (us < 100 ? us.toFixed(1) : us.toFixed(0));
  const pad = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] as number)).join(' ');
  let op: string | undefined;
  for (const r of rows) {
    if (r.op !== op) {
      op = r.op;
      lines.push('', `# ${r.op}, ${r.ranks} ranks`, pad(header));
    }
    lines.push(
      pad([
        formatBytes(r.bytes),
        String(r.count),
        dtype,
        String(r.iterations),
        micros(r.timeUs),
        micros(r.medianUs),
        micros(r.cpuUs),
        r.warmupUs > 0 ? micros(r.warmupUs) : '-',
        r.algbwGBs.toFixed(3),
        r.busbwGBs.toFixed(3),
        r.ok === null ? '-' : r.ok ? 'ok' : 'WRONG',
        (r.maxRssBytes / (1 << 20)).toFixed(0),
      ]),
    );
  }
  return lines.join('\n');
}
