/**
 * The control plane's share of a bench run: per (op, size), the control messages and bytes a
 * rank sent per timed call (ready rounds and their eager data, rank 0's decisions), as the mean
 * and the largest over the ranks (rank 0 also sends its decisions; with recursive doubling a
 * core rank with an extra rank sends up to two messages more per round than the others).
 */
import type { BenchReport } from './spec.js';

function fixed(value: number): string {
  return value.toFixed(value < 10 ? 2 : 1);
}

export function controlLines(reports: readonly BenchReport[]): string {
  const lines = ['', '# control plane per call and rank (sent; mean over ranks / largest):'];
  const first = reports.find((r) => r.rows.length > 0);
  for (const [i, row] of (first?.rows ?? []).entries()) {
    const rows = reports.flatMap((r) => (r.rows[i] ? [r.rows[i]] : []));
    const messages = rows.map((r) => r.controlMessages ?? 0);
    const bytes = rows.map((r) => r.controlBytes ?? 0);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    lines.push(
      `#   ${row.op} ${row.bytes} B: ${fixed(mean(messages))} / ${fixed(Math.max(...messages))} messages, ` +
        `${fixed(mean(bytes))} / ${fixed(Math.max(...bytes))} bytes`,
    );
  }
  return lines.join('\n');
}
