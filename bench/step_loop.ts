/**
 * A training loop's step, timed in a plain loop under ringrun (the bench's step line times the
 * same cases among others; this loop adds the CPU per step and the time in young-generation
 * garbage collections, and runs on any number of ranks, one included):
 *
 *   node bin/ringrun.js -np 2 node dist/bench/step_loop.js --mode grouped [--warmup 2000] [--steps 1000]
 *
 * Modes: `grouped` (100 float32 tensors of 4 KiB as one groupedAllreduce with `outs`), `named`
 * (the same as 100 named allreduce calls with `out`, gathered by Promise.all), `one` (one 400 KiB
 * allreduce with `out`), `tiny` (one 4-byte allreduce with `out`). Rank 0 prints its mean time
 * per step, its process's CPU per step (both threads) and its time in young-generation
 * collections per step (a PerformanceObserver of `gc` entries, the caller's thread).
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { RingReduce } from '../src/index.js';

const kModes = ['grouped', 'named', 'one', 'tiny'] as const;
type Mode = (typeof kModes)[number];
const kTensors = 100;
const kElements = 1024;

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'grouped' },
    warmup: { type: 'string', default: '2000' },
    steps: { type: 'string', default: '1000' },
  },
});
const mode = values.mode as Mode;
if (!kModes.includes(mode)) throw new Error(`--mode must be one of ${kModes.join(', ')}, got ${values.mode}`);
const warmup = Number(values.warmup);
const steps = Number(values.steps);
if (!Number.isInteger(warmup) || warmup < 0) throw new Error(`--warmup must be a whole number, got ${values.warmup}`);
if (!Number.isInteger(steps) || steps < 1) throw new Error(`--steps must be a positive whole number, got ${values.steps}`);

const shared = (length: number) => new Float32Array(new SharedArrayBuffer(length * 4));
const rr = await RingReduce.init();
const tensors = Array.from({ length: kTensors }, () => new Float32Array(kElements).fill(1));
const outs = tensors.map(() => shared(kElements));
const names = tensors.map((_, i) => `grad${i}`);
const big = new Float32Array(kTensors * kElements).fill(1);
const bigOut = shared(kTensors * kElements);
const tiny = Float32Array.of(1);
const tinyOut = shared(1);

async function step(): Promise<unknown> {
  switch (mode) {
    case 'grouped':
      return rr.groupedAllreduce(tensors, { name: 'grads', outs });
    case 'named':
      return Promise.all(tensors.map((t, i) => rr.allreduce(t, { name: names[i] as string, out: outs[i] as Float32Array })));
    case 'one':
      return rr.allreduce(big, { name: 'big', out: bigOut });
    case 'tiny':
      return rr.allreduce(tiny, { name: 'tiny', out: tinyOut });
  }
}

for (let i = 0; i < warmup; i++) await step();
await rr.barrier();
let youngMs = 0;
const observer = new PerformanceObserver((list) => {
  // kind 1: NODE_PERFORMANCE_GC_MINOR.
  for (const entry of list.getEntries())
    if ((entry as { detail?: { kind?: number } }).detail?.kind === 1) youngMs += entry.duration;
});
observer.observe({ entryTypes: ['gc'] });
const cpu = process.cpuUsage();
const started = performance.now();
for (let i = 0; i < steps; i++) await step();
const elapsedMs = performance.now() - started;
const used = process.cpuUsage(cpu);
// The observer's entries arrive on a later turn.
await new Promise((resolve) => setTimeout(resolve, 50));
observer.disconnect();
if (rr.rank() === 0) {
  const perStep = (ms: number) => ((ms * 1000) / steps).toFixed(0);
  console.log(
    `${mode}, ${rr.size()} rank(s): ${perStep(elapsedMs)} µs per step, CPU ${perStep((used.user + used.system) / 1000)} µs per step, young-generation GC ${perStep(youngMs)} µs per step (${steps} steps after ${warmup})`,
  );
}
await rr.shutdown();
