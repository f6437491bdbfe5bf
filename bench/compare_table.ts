/**
 * Reads a compare_peers.sh output directory and prints the side-by-side table: mean time per
 * call for OpenMPI (shm, TCP), Gloo and ringreduce, per rank count, and ringreduce's time
 * relative to the best TCP peer and to Gloo (< 1 = faster), with the 2-rank floors of an 8-byte
 * call (thread_hop_floor.js: ringreduce's thread hand-offs alone, and a caller thread that owns
 * the socket) in the smallest size's column, and ringreduce's mean per call during its warm-up
 * (a cold process, before V8 has optimized it). Of the repetitions it takes the best (the run
 * least disturbed by the other users of the shared machine), the same rule for every library;
 * `--median` takes the median instead.
 *
 *   node dist/bench/compare_table.js /tmp/ringreduce-compare/<run>
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

type Series = Map<number, number[]>; // bytes → times (µs)
const series = new Map<string, Series>(); // "np2 OpenMPI TCP" → …

function add(name: string, bytes: number, us: number): void {
  let s = series.get(name);
  if (!s) {
    s = new Map();
    series.set(name, s);
  }
  const list = s.get(bytes) ?? [];
  list.push(us);
  s.set(bytes, list);
}

/** ringreduce run in place (bench --in-place): the same collective without the input copy. */
const kInPlace = 'ringreduce in place';
/** ringreduce with RINGREDUCE_ENGINE_THREAD=0: the engine on the caller's thread. */
const kCallerThread = "ringreduce, engine on the caller's thread";
/** ringreduce's default rows during their warm-up: a cold process's first calls (bench `warm(us)`). */
const kWarmUp = 'ringreduce, warm-up calls';

const kPeerNames: Record<string, string> = {
  'mpi-allreduce-shm': 'OpenMPI shm',
  'mpi-allreduce-tcp': 'OpenMPI TCP',
  'gloo-allreduce-tcp': 'Gloo TCP',
};

function readPeers(dir: string): void {
  for (const file of readdirSync(dir)) {
    const match = /^coll\.(.+)-np(\d+)\.rep\d+\.tsv$/.exec(file);
    const label = match ? kPeerNames[match[1] as string] : undefined;
    if (!match || !label) continue;
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      const cols = line.split('\t');
      if (line.startsWith('#') || cols.length < 6) continue;
      add(`np${match[2]} ${label}`, Number(cols[2]), Number(cols[5]));
    }
  }
}

const root = process.argv.slice(2).find((a) => !a.startsWith('--'));
if (!root) throw new Error('usage: compare_table.js <dir>');
const idle: string[] = [];
const floors: { mode: string; meanUs: number }[] = [];
for (const entry of readdirSync(root)) {
  const path = join(root, entry);
  if (/^peers\.rep\d+$/.test(entry)) {
    readPeers(path);
    if (existsSync(join(path, 'quiet.log'))) idle.push(...readFileSync(join(path, 'quiet.log'), 'utf8').trim().split('\n'));
  }
  const floor = /^floor-(engine-thread|caller-only)\.rep\d+\.json$/.exec(entry);
  if (floor) floors.push({ mode: floor[1] as string, ...(JSON.parse(readFileSync(path, 'utf8')) as { meanUs: number }) });
  const rr = /^ringreduce(-inplace|-callerthread)?-np(\d+)\.rep\d+\.json$/.exec(entry);
  if (rr) {
    const report = JSON.parse(readFileSync(path, 'utf8')) as {
      rows: { bytes: number; timeUs: number; warmupUs?: number }[];
      machine: { before: string };
    };
    const label = `np${rr[2]} ${rr[1] === '-inplace' ? kInPlace : rr[1] === '-callerthread' ? kCallerThread : 'ringreduce'}`;
    for (const row of report.rows) add(label, row.bytes, row.timeUs);
    // What the same rows cost while V8 was still optimizing them (the warm-up's mean per call).
    if (rr[1] === undefined)
      for (const row of report.rows) if (row.warmupUs) add(`np${rr[2]} ${kWarmUp}`, row.bytes, row.warmupUs);
    idle.push(`${label}: ${report.machine.before}`);
  }
}

const useMedian = process.argv.includes('--median');
const median = (v: number[]) => (useMedian ? ([...v].sort((a, b) => a - b)[v.length >> 1] as number) : Math.min(...v));
const sizes = [...new Set([...series.values()].flatMap((s) => [...s.keys()]))].sort((a, b) => a - b);
const fmtSize = (b: number) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);
const fmtTime = (us: number, bytes: number) => {
  const t = us >= 10_000 ? `${(us / 1000).toFixed(1)} ms` : us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`;
  return bytes >= 1 << 20 ? `${t} · ${(bytes / us / 1e3).toFixed(2)} GB/s` : t;
};
console.log(`| | ${sizes.map(fmtSize).join(' | ')} |\n|---|${sizes.map(() => '---:').join('|')}|`);
for (const name of [...series.keys()].sort()) {
  const s = series.get(name) as Series;
  console.log(`| ${name} | ${sizes.map((b) => (s.has(b) ? fmtTime(median(s.get(b) as number[]), b) : '-')).join(' | ')} |`);
}
const kFloorNames: Record<string, string> = {
  'engine-thread': 'np2 floor, caller + engine thread (8 B)',
  'caller-only': 'np2 floor, caller thread only (8 B)',
};
for (const [mode, name] of Object.entries(kFloorNames)) {
  const times = floors.filter((f) => f.mode === mode).map((f) => f.meanUs);
  if (times.length > 0) console.log(`| ${name} | ${fmtTime(median(times), 0)}${' | -'.repeat(Math.max(0, sizes.length - 1))} |`);
}
for (const np of [...new Set([...series.keys()].map((n) => n.split(' ')[0]))]) {
  for (const variant of ['ringreduce', kInPlace, kCallerThread]) {
    const rr = series.get(`${np} ${variant}`);
    if (!rr) continue;
    const ratios = sizes.map((b) => {
      const peers = ['OpenMPI TCP', 'Gloo TCP'].map((p) => series.get(`${np} ${p}`)?.get(b)).filter((v): v is number[] => !!v);
      const mine = rr.get(b);
      if (!mine || peers.length === 0) return '-';
      return `${(median(mine) / Math.min(...peers.map(median))).toFixed(2)}×`;
    });
    console.log(`| ${np} ${variant} ÷ best TCP peer | ${ratios.join(' | ')} |`);
    const gloo = series.get(`${np} Gloo TCP`);
    if (variant !== kInPlace && gloo) {
      const toGloo = sizes.map((b) => {
        const mine = rr.get(b);
        const theirs = gloo.get(b);
        return mine && theirs ? `${(median(mine) / median(theirs)).toFixed(2)}×` : '-';
      });
      console.log(`| ${np} ${variant} ÷ Gloo | ${toGloo.join(' | ')} |`);
    }
  }
}
console.log(
  `\n${useMedian ? 'median' : 'best'} of the repetitions; algbw in GB/s for 1 MiB and up (bytes / time). Machine state before each run:\n${idle.map((l) => `    ${l}`).join('\n')}`,
);
