/**
 * A long run of mixed collectives, to find memory that grows with the number of calls (a map
 * entry kept per call, a buffer never returned to its pool, a listener added per call).
 *
 *   npm run soak                                   # 3 ranks, 100,000 calls per rank
 *   node bin/ringrun.js -np 2 node --expose-gc dist/bench/soak.js --calls 20000
 *
 * Every rank makes the same sequence of calls: named allreduces (fresh outputs and `out`),
 * unnamed ones, allgather, broadcast, reducescatter, alltoall, grouped allreduces, object
 * collectives, barriers, sends and receives, and collectives in a process set of ranks 0 and 1.
 * Every `--sample` calls each rank collects garbage (with --expose-gc) and samples its process's
 * resident set, its caller thread's heap and its ArrayBuffer memory. After the warm-up (the
 * first fifth of the calls) the samples' growth is fitted by least squares; rank 0 prints every
 * rank's growth per 10,000 calls and over the whole run, and whether it stays within noise.
 * The resident set holds the engine thread's heap too; to see that heap alone, add --trace-gc
 * to the node options and read the post-collection sizes of the worker's isolate.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import * as rr from '../src/index.js';

interface Sample {
  calls: number;
  rss: number;
  heapUsed: number;
  arrayBuffers: number;
}

type Measure = Exclude<keyof Sample, 'calls'>;

const kMeasures: readonly Measure[] = ['rss', 'heapUsed', 'arrayBuffers'];
/**
 * Fitted growth over the run (after warm-up) that counts as noise. The resident set moves by
 * some MiB either way as malloc's arenas grow and shrink (docs/performance.md), the heaps after
 * a full collection by kilobytes.
 */
const kNoiseBytes: Record<Measure, number> = { rss: 32 << 20, heapUsed: 2 << 20, arrayBuffers: 1 << 20 };

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('a positive integer');
  return n;
}

const options = new Command('soak')
  .description('mixed collectives for a long time; reports memory growth after warm-up')
  .addOption(new Option('--calls <n>', 'calls per rank').argParser(positiveInt).default(100_000))
  .addOption(new Option('--sample <n>', 'calls between memory samples').argParser(positiveInt).default(2_500))
  .parse(rr.programArgs() as string[], { from: 'user' })
  .opts<{ calls: number; sample: number }>();

function sample(calls: number): Sample {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { calls, rss: m.rss, heapUsed: m.heapUsed, arrayBuffers: m.arrayBuffers };
}

/** Least-squares slope of y over x. */
function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;

await rr.init();
const rank = rr.rank();
const size = rr.size();
const pair = await rr.addProcessSet(size >= 2 ? [0, 1] : [0]);
const out = new Float32Array(new SharedArrayBuffer(4096 * 4));
const sizes = [1, 100, 4096] as const;
const samples: Sample[] = [];
/** Calls of the mix so far: the same count on every rank (a call this rank sits out counts too). */
let calls = 0;
const started = performance.now();

/** One step of the mix: every rank runs the same calls for the same `i`. */
async function step(i: number): Promise<void> {
  const length = sizes[i % sizes.length] as number;
  const grad = new Float32Array(length).fill(rank + 1);
  const sum = await rr.allreduce(grad, { name: `grad.${i % 50}` });
  if (sum[0] !== (size * (size + 1)) / 2) throw new Error(`allreduce ${i}: ${sum[0]}`);
  await rr.allreduce(grad, { name: `grad.out.${i % 20}`, out: out.subarray(0, length) });
  calls += 2;
  if (i % 7 === 0) {
    await rr.allreduce(Int32Array.of(rank));
    calls++;
  }
  if (i % 5 === 0) {
    await rr.allgather(Int32Array.of(rank, i), { name: `gather.${i % 10}` });
    calls++;
  }
  if (i % 11 === 0) {
    await rr.broadcast(new Float64Array(8).fill(rank), { name: 'bcast', root: i % size });
    calls++;
  }
  if (i % 13 === 0) {
    await rr.reducescatter(new Float32Array(size * 4).fill(1), { name: 'rs' });
    await rr.alltoall(new Int32Array(size * 2).fill(rank), { name: 'a2a' });
    calls += 2;
  }
  if (i % 17 === 0) {
    await rr.groupedAllreduce([new Float32Array(10), new Float32Array(1000), new Float32Array(3)], { name: `group.${i % 3}` });
    calls++;
  }
  if (i % 19 === 0) {
    await rr.allgatherObject({ rank, step: i, note: 'x'.repeat(i % 64) });
    await rr.broadcastObject(rank === 0 ? { step: i } : null);
    calls += 2;
  }
  if (i % 23 === 0 && size >= 2) {
    const peer = rank ^ 1;
    if (peer < size) {
      const message = new Float32Array(256).fill(rank);
      if (rank % 2 === 0) {
        await rr.send(message, { to: peer, tag: 7 });
        await rr.recv(message, { from: peer, tag: 7 });
      } else {
        await rr.recv(message, { from: peer, tag: 7 });
        await rr.send(message, { to: peer, tag: 7 });
      }
    }
    calls += 2;
  }
  if (i % 29 === 0) {
    await rr.barrier();
    calls++;
  }
  if (i % 3 === 0) {
    if (pair.includes(rank)) await rr.allreduce(new Float32Array(64).fill(1), { name: `set.${i % 5}`, processSet: pair });
    calls++;
  }
}

for (let i = 0; calls < options.calls; i++) {
  await step(i);
  if (samples.length === 0 || calls - (samples.at(-1) as Sample).calls >= options.sample) samples.push(sample(calls));
}
samples.push(sample(calls));
const seconds = (performance.now() - started) / 1000;

const warm = samples.filter((s) => s.calls >= options.calls / 5);
const report = {
  rank,
  calls,
  seconds,
  series: samples.filter((_, k) => k % Math.max(1, Math.floor(samples.length / 10)) === 0 || k === samples.length - 1),
  first: warm[0] as Sample,
  last: warm.at(-1) as Sample,
  perTenThousand: Object.fromEntries(kMeasures.map((m) => [m, slope(warm.map((s) => [s.calls, s[m]])) * 10_000])) as Record<
    Measure,
    number
  >,
};
const reports = await rr.allgatherObject(report);
if (rank === 0) {
  console.log(
    `# soak: ${size} ranks, ${calls} calls per rank in ${seconds.toFixed(0)} s (${((seconds / calls) * 1e6).toFixed(0)} µs per call)`,
  );
  console.log(`# growth after warm-up (${report.first.calls} calls), fitted per 10,000 calls and over the run:`);
  let grew = false;
  for (const r of reports) {
    const parts = kMeasures.map((m) => {
      const over = r.last[m] - r.first[m];
      if (r.perTenThousand[m] * ((r.last.calls - r.first.calls) / 10_000) > kNoiseBytes[m]) grew = true;
      return `${m} ${mib(r.first[m])} → ${mib(r.last[m])} (${mib(over)}; ${mib(r.perTenThousand[m])}/10k)`;
    });
    console.log(`rank ${r.rank}: ${parts.join(', ')}`);
    console.log(`#   resident set by calls: ${r.series.map((s) => `${s.calls}: ${mib(s.rss)}`).join(', ')}`);
  }
  const limits = kMeasures.map((m) => `${m} ${mib(kNoiseBytes[m])}`).join(', ');
  console.log(
    grew ? `GROWTH: some rank's fitted growth over the run exceeds the noise (${limits})` : `no growth beyond noise (${limits})`,
  );
  if (!(globalThis as { gc?: () => void }).gc)
    console.log('# without --expose-gc the heap figures include garbage not yet collected');
}
await rr.shutdown();
