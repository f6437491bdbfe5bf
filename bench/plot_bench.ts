/** The plot of one bench run (--plot), with the peers' figures of the same ops and rank count (--peers). */
import type { BenchArgs } from './args.js';
import { type PlotSeries, plotSvg } from './plot.js';
import { peerSeries } from './plot_peers.js';
import type { ResultRow } from './table.js';

export function benchPlot(rows: readonly ResultRow[], args: BenchArgs): string {
  const ops = [...new Set(rows.map((r) => r.op))];
  const series: PlotSeries[] = [];
  for (const op of ops) {
    series.push({
      label: `ringreduce ${op}`,
      points: rows.filter((r) => r.op === op).map(({ bytes, timeUs, busbwGBs }) => ({ bytes, timeUs, busbwGBs })),
    });
    if (args.peers !== undefined) series.push(...peerSeries(args.peers, op, rows[0]?.ranks ?? args.ranks));
  }
  const mode = args.fresh ? 'fresh output' : args.inPlace ? 'in place' : 'output reused';
  return plotSvg(
    series,
    `ringreduce bench: ${rows[0]?.ranks ?? args.ranks} ranks, ${args.dtype}, backend ${args.backend}, ${mode}`,
  );
}
