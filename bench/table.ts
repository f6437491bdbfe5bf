/**
 * Merges the ranks' reports into rows (the slowest rank's time, as nccl-tests does) and prints
 * them in the nccl-tests layout, with the median iteration next to the mean (time): algbw = bytes / time; busbw = algbw × the share of the buffer
 * each link must carry (allreduce 2(n-1)/n, allgather (n-1)/n, broadcast 1), comparable across
 * rank counts and with the peers' figures.
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
  algbwGBs: number;
  busbwGBs: number;
  ok: boolean | null;
  /** Largest peak RSS of any rank, bytes. */
  maxRssBytes: number;
}

export function busFactor(op: BenchOp, n: number): number {
  if (n <= 1) return 1;
  if (op === 'allreduce') return (2 * (n - 1)) / n;
  if (op === 'allgather') return (n - 1) / n;
  return 1;
}

export function mergeReports(reports: readonly BenchReport[]): ResultRow[] {
  const first = reports[0];
  if (!first) return [];
  const n = first.size;
  return first.rows.map((row, i) => {
    let timeUs = 0;
    let medianUs = 0;
    let ok: boolean | null = row.ok;
    let maxRssBytes = 0;
    for (const report of reports) {
      const r = report.rows[i];
      if (!r) throw new Error(`rank ${report.rank} has no row ${i}`);
      timeUs = Math.max(timeUs, r.timeUs);
      medianUs = Math.max(medianUs, r.medianUs);
      if (r.ok !== null) ok = (ok ?? true) && r.ok;
      maxRssBytes = Math.max(maxRssBytes, r.maxRssBytes);
    }
    const algbwGBs = row.bytes / (timeUs * 1e-6) / 1e9;
    return { ...row, ranks: n, timeUs, medianUs, ok, maxRssBytes, algbwGBs, busbwGBs: algbwGBs * busFactor(row.op, n) };
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
  const header = ['size', 'count', 'type', 'iters', 'time(us)', 'p50(us)', 'algbw(GB/s)', 'busbw(GB/s)', 'check', 'peakRSS(MiB)'];
  const widths = [10, 11, 8, 6, 12, 10, 12, 12, 6, 13];
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
        r.algbwGBs.toFixed(3),
        r.busbwGBs.toFixed(3),
        r.ok === null ? '-' : r.ok ? 'ok' : 'WRONG',
        (r.maxRssBytes / (1 << 20)).toFixed(0),
      ]),
    );
  }
  return lines.join('\n');
}
