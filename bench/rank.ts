/**
 * One rank of `npm run bench`, started by ringrun: joins the job, runs every (op, size) of the
 * spec with warm-up, times the iterations between two barriers, checks the last result and
 * writes its report as JSON for the driver.
 *
 *   node dist/bench/rank.js <spec.json>
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { RingReduce } from '../src/api/runtime.js';
import { allocShared, bytesPerElement } from '../src/core/dtypes.js';
import type { TypedArray } from '../src/core/types.js';
import { checkOutput, makeInput } from './patterns.js';
import { autoIterations, type BenchOp, type BenchReport, type BenchRow, type BenchSpec } from './spec.js';

const kRoot = 0;
/** The idle probe waits this long first (the collector's after-work), then measures one second. */
const kIdleSettleMs = 2000;
const kIdleProbeMs = 1000;

/**
 * `out` (a reused output) or undefined for fresh memory per call, the API's default. Each call
 * is named, as a training loop names its gradients, so repeated calls hit the response cache.
 */
async function runOne(rr: RingReduce, spec: BenchSpec, op: BenchOp, input: TypedArray, out: TypedArray | undefined) {
  const name = `bench/${op}/${input.byteLength}`;
  if (spec.sync) {
    if (op === 'allreduce') return rr.allreduceSync(input, out ? { name, out } : { name });
    if (op === 'allgather') return rr.allgatherSync(input, out ? { name, out } : { name });
    return rr.broadcastSync(input, out ? { name, root: kRoot, out } : { name, root: kRoot });
  }
  if (op === 'allreduce') return rr.allreduce(input, out ? { name, out } : { name });
  if (op === 'allgather') return rr.allgather(input, out ? { name, out } : { name });
  return rr.broadcast(input, out ? { name, root: kRoot, out } : { name, root: kRoot });
}

/** `tensors` allreduces submitted together, as a training step submits its gradients. */
async function runMany(rr: RingReduce, inputs: readonly TypedArray[], outs: readonly (TypedArray | undefined)[]) {
  const results = await Promise.all(
    inputs.map((input, i) => rr.allreduce(input, outs[i] ? { name: `grad${i}`, out: outs[i] } : { name: `grad${i}` })),
  );
  return results[0] as TypedArray;
}

async function measure(rr: RingReduce, spec: BenchSpec, op: BenchOp, bytes: number): Promise<BenchRow> {
  const size = rr.size();
  const element = bytesPerElement(spec.dtype);
  const count = Math.max(1, Math.floor(bytes / element));
  // allgather's size is its output: each rank contributes 1/N of it (at least one element).
  const perRank = op === 'allgather' ? Math.max(1, Math.floor(count / size)) : count;
  const input = makeInput(spec.dtype, perRank, rr.rank());
  const iterations = spec.iterations > 0 ? spec.iterations : autoIterations(bytes);
  // allgather's output holds every rank's part.
  const reused = spec.fresh ? undefined : allocShared(spec.dtype, op === 'allgather' ? perRank * size : perRank);
  const many = op === 'allreduce' && spec.tensors > 1;
  const outs = Array.from({ length: many ? spec.tensors : 0 }, () => (spec.fresh ? undefined : allocShared(spec.dtype, perRank)));
  // In place: each tensor is its own output, zeros while timed (see BenchSpec.inPlace).
  const inPlace = spec.inPlace && op !== 'allgather';
  const inputs = outs.map((o) => (inPlace ? (o as TypedArray) : input));
  const tensor = inPlace ? (reused as TypedArray) : input;
  const step = () => (many ? runMany(rr, inputs, outs) : runOne(rr, spec, op, tensor, reused));
  let out = input;
  for (let i = 0; i < spec.warmup; i++) out = await step();
  await rr.barrier();
  const times = new Float64Array(iterations);
  const start = performance.now();
  let last = start;
  for (let i = 0; i < iterations; i++) {
    out = await step();
    const now = performance.now();
    times[i] = (now - last) * 1000;
    last = now;
  }
  const timeUs = ((last - start) * 1000) / iterations;
  times.sort();
  await rr.barrier();
  if (inPlace && spec.check) {
    for (const buffer of many ? inputs : [tensor]) buffer.set(input as never);
    out = await step();
  }
  const ok = spec.check ? checkOutput(op, out, size, perRank, kRoot, spec.dtype) : null;
  const total = (op === 'allgather' ? perRank * size : count) * (many ? spec.tensors : 1);
  return {
    op,
    bytes: total * element,
    count: total,
    iterations,
    timeUs,
    medianUs: times[Math.floor((iterations - 1) / 2)] ?? timeUs,
    ok,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
}

async function main(): Promise<void> {
  const specPath = process.argv[2];
  if (!specPath) throw new Error('usage: rank.js <spec.json>');
  const spec = JSON.parse(readFileSync(specPath, 'utf8')) as BenchSpec;
  const rr = await RingReduce.init();
  const rows: BenchRow[] = [];
  let idleCpuMs = 0;
  try {
    for (const op of spec.ops) for (const bytes of spec.sizes) rows.push(await measure(rr, spec, op, bytes));
    // An idle job must use no CPU: measure this process (both threads) while nothing is pending.
    await new Promise((resolve) => setTimeout(resolve, kIdleSettleMs));
    const before = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, kIdleProbeMs));
    const used = process.cpuUsage(before);
    idleCpuMs = (used.user + used.system) / 1000;
  } finally {
    await rr.shutdown();
  }
  const report: BenchReport = { rank: rr.rank(), size: rr.size(), rows, idleCpuMs };
  writeFileSync(join(spec.outDir, `rank.${rr.rank()}.json`), JSON.stringify(report));
}

await main();
