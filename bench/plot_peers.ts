/**
 * The peers' figures for the bench's plot: the TSV files ../shared/bench/run-peers.sh writes
 * (coll.<library>-<op>-<transport>-np<N>.rep<R>.tsv, directly or under a compare_peers.sh run's
 * peers.rep<R>/ folders), columns op, nranks, bytes, count, iters, avg_us, ... Of the repetitions,
 * the best time per size (compare_table.ts's rule).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { PlotSeries } from './plot.js';
import type { BenchOp } from './spec.js';
import { busFactor } from './table.js';

const kNames: Record<string, string> = {
  'mpi-allreduce-shm': 'OpenMPI shm',
  'mpi-allreduce-tcp': 'OpenMPI TCP',
  'gloo-allreduce-tcp': 'Gloo TCP',
  'mpi-allgather-shm': 'OpenMPI shm',
  'mpi-allgather-tcp': 'OpenMPI TCP',
  'mpi-bcast-shm': 'OpenMPI shm',
  'mpi-bcast-tcp': 'OpenMPI TCP',
};
/** The peers' op names, as the bench names them. */
const kOps: Record<string, BenchOp> = { allreduce: 'allreduce', allgather: 'allgather', bcast: 'broadcast' };

function tsvFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsvFiles(path);
    return /^coll\..+\.tsv$/.test(name) ? [path] : [];
  });
}

/** The peers' series of `op` on `ranks` ranks found under `dir` (best of the repetitions). */
export function peerSeries(dir: string, op: BenchOp, ranks: number): PlotSeries[] {
  const best = new Map<string, Map<number, number>>();
  for (const file of tsvFiles(dir)) {
    const match = /coll\.(.+)-np(\d+)\.rep\d+\.tsv$/.exec(file);
    if (!match || Number(match[2]) !== ranks) continue;
    const label = kNames[match[1] as string] ?? (match[1] as string);
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const cols = line.split('\t');
      if (line.startsWith('#') || cols.length < 6 || kOps[cols[0] as string] !== op) continue;
      const bytes = Number(cols[2]);
      const us = Number(cols[5]);
      if (!(bytes > 0 && us > 0)) continue;
      const sizes = best.get(label) ?? new Map<number, number>();
      best.set(label, sizes);
      sizes.set(bytes, Math.min(sizes.get(bytes) ?? Number.POSITIVE_INFINITY, us));
    }
  }
  return [...best.entries()].map(([label, sizes]) => ({
    label: `${label} ${op}`,
    peer: true,
    points: [...sizes.entries()].map(([bytes, timeUs]) => ({
      bytes,
      timeUs,
      busbwGBs: (bytes / (timeUs * 1e-6) / 1e9) * busFactor(op, ranks),
    })),
  }));
}
