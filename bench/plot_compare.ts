/**
 * The picture of a compare_peers.sh run: ringreduce's allreduce (best of the repetitions, the
 * API's default and in place) next to the peers', one SVG per rank count.
 *
 *   node dist/bench/plot_compare.js /tmp/ringreduce-compare/<run> [out-prefix]   # writes <out-prefix>-np2.svg, ...
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type PlotSeries, plotSvg } from './plot.js';
import { peerSeries } from './plot_peers.js';
import { busFactor } from './table.js';

const [dir, prefix = join(process.argv[2] ?? '.', 'allreduce')] = process.argv.slice(2);
if (!dir) throw new Error('usage: plot_compare.js <compare_peers.sh output folder> [out-prefix]');
const best = new Map<string, Map<number, number>>(); // "np2 ringreduce" → bytes → µs
for (const entry of readdirSync(dir)) {
  const match = /^ringreduce(-inplace)?-np(\d+)\.rep\d+\.json$/.exec(entry);
  if (!match) continue;
  const key = `${match[2]} ${match[1] ? 'ringreduce in place' : 'ringreduce'}`;
  const sizes = best.get(key) ?? new Map<number, number>();
  best.set(key, sizes);
  const report = JSON.parse(readFileSync(join(dir, entry), 'utf8')) as { rows: { bytes: number; timeUs: number }[] };
  for (const row of report.rows) sizes.set(row.bytes, Math.min(sizes.get(row.bytes) ?? Number.POSITIVE_INFINITY, row.timeUs));
}
for (const np of new Set([...best.keys()].map((key) => Number(key.split(' ')[0])))) {
  const series: PlotSeries[] = [...best.entries()]
    .filter(([key]) => Number(key.split(' ')[0]) === np)
    .map(([key, sizes]) => ({
      label: key.split(' ').slice(1).join(' '),
      points: [...sizes.entries()].map(([bytes, timeUs]) => ({
        bytes,
        timeUs,
        busbwGBs: (bytes / (timeUs * 1e-6) / 1e9) * busFactor('allreduce', np),
      })),
    }));
  series.push(...peerSeries(dir, 'allreduce', np));
  const out = `${prefix}-np${np}.svg`;
  writeFileSync(out, plotSvg(series, `allreduce on ${np} ranks: ringreduce and its peers (best of the repetitions)`));
  console.log(out);
}
