/**
 * One rank of `npm run bench`, started by ringrun: joins the job, runs every (op, size) of the
 * spec with warm-up, times the iterations between two barriers, checks the last result against
 * the one computed here (patterns.ts) and writes its report as JSON for the driver.
 *
 *   node dist/bench/rank.js <spec.json>
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ProcessSet } from '../src/api/process_set.js';
import { RingReduce } from '../src/api/runtime.js';
import { allocShared, bytesPerElement } from '../src/core/dtypes.js';
import type { TypedArray } from '../src/core/types.js';
import { checkOutput, expectedResult, makeInput, type RowLayout } from './patterns.js';
import {
  autoIterations,
  autoWarmup,
  type BenchOp,
  type BenchReport,
  type BenchRow,
  type BenchSpec,
  kSplitOps,
  kStepTensorBytes,
  kStepTensors,
} from './spec.js';

const kRoot = 0;
/** Barriers spread through the warm-up (see measure). */
const kWarmupParts = 4;
/** The idle probe waits this long first (the collector's after-work), then measures one second. */
const kIdleSettleMs = 2000;
const kIdleProbeMs = 1000;
/** Ops that --in-place runs with the tensor as its own `out` (reduce: on the root). */
const kInPlaceOps: readonly BenchOp[] = ['allreduce', 'broadcast', 'reduce', 'reducescatter'];

/**
 * One call of `op` on `tensor` (null: a scatter off the root), with `out` (a reused output) or
 * undefined for fresh memory per call, the API's default. Each call is named, as a training loop
 * names its gradients, so repeated calls of the cached ops hit the response cache. Resolves to
 * the rank's result data, null where the op gives this rank nothing.
 */
async function runOne(
  rr: RingReduce,
  spec: BenchSpec,
  op: BenchOp,
  named: string,
  tensor: TypedArray | null,
  out: TypedArray | undefined,
  processSet: ProcessSet | undefined,
): Promise<TypedArray | null> {
  const sync = spec.sync;
  const root = kRoot;
  const t = tensor as TypedArray;
  // The name, the process set when the run measures one, and the compression for the ops that take it.
  const where = processSet ? { processSet } : {};
  const name = named;
  const scope = {
    ...(processSet ? { processSet } : {}),
    ...(spec.compression === 'fp16' ? { compression: 'fp16' as const } : {}),
  };
  switch (op) {
    case 'allreduce': {
      const o = out ? { name, out, ...scope } : { name, ...scope };
      return sync ? rr.allreduceSync(t, o) : rr.allreduce(t, o);
    }
    case 'allgather': {
      const o = out ? { name, out, ...scope } : { name, ...scope };
      return sync ? rr.allgatherSync(t, o) : rr.allgather(t, o);
    }
    case 'broadcast': {
      const o = out ? { name, root, out, ...where } : { name, root, ...where };
      return sync ? rr.broadcastSync(t, o) : rr.broadcast(t, o);
    }
    case 'reducescatter': {
      const o = out ? { name, out, ...scope } : { name, ...scope };
      return sync ? rr.reducescatterSync(t, o) : rr.reducescatter(t, o);
    }
    case 'alltoall': {
      const o = out ? { name, out, ...where } : { name, ...where };
      return (sync ? rr.alltoallSync(t, o) : await rr.alltoall(t, o)).output;
    }
    case 'reduce': {
      const o = out ? { name, root, out, ...where } : { name, root, ...where };
      return sync ? rr.reduceSync(t, o) : rr.reduce(t, o);
    }
    case 'gather': {
      const o = out ? { name, root, out, ...where } : { name, root, ...where };
      return sync ? rr.gatherSync(t, o) : rr.gather(t, o);
    }
    case 'scatter': {
      const o = out ? { name, root, out, ...where } : { name, root, ...where };
      return (sync ? rr.scatterSync(tensor, o) : await rr.scatter(tensor, o)).data as TypedArray;
    }
  }
}

/** `tensors` allreduces submitted together, as a training step submits its gradients. */
async function runMany(
  rr: RingReduce,
  spec: BenchSpec,
  inputs: readonly TypedArray[],
  outs: readonly (TypedArray | undefined)[],
  processSet: ProcessSet | undefined,
) {
  const scope = {
    ...(processSet ? { processSet } : {}),
    ...(spec.compression === 'fp16' ? { compression: 'fp16' as const } : {}),
  };
  if (spec.grouped) {
    const given = outs.every((o) => o !== undefined) ? { outs: outs as TypedArray[] } : {};
    const grouped = await rr.groupedAllreduce(inputs as TypedArray[], { name: 'grads', ...given, ...scope });
    return grouped[0] as TypedArray;
  }
  const results = await Promise.all(
    inputs.map((input, i) =>
      rr.allreduce(input, outs[i] ? { name: `grad${i}`, out: outs[i], ...scope } : { name: `grad${i}`, ...scope }),
    ),
  );
  return results[0] as TypedArray;
}

async function measure(
  rr: RingReduce,
  spec: BenchSpec,
  op: BenchOp,
  bytes: number,
  processSet: ProcessSet | undefined,
): Promise<BenchRow> {
  const size = processSet ? processSet.size() : rr.size();
  const rank = processSet ? processSet.rank() : rr.rank();
  const scope = processSet ? { processSet } : {};
  const element = bytesPerElement(spec.dtype);
  const requested = Math.max(1, Math.floor(bytes / element));
  // The split ops' size is N parts of perRank elements (spec.ts), at least one element each.
  const perRank = kSplitOps.includes(op) ? Math.max(1, Math.floor(requested / size)) : requested;
  const count = kSplitOps.includes(op) ? perRank * size : requested;
  const layout: RowLayout = { size, rank, count, perRank, root: kRoot };
  // allgather and gather contribute one part; scatter's input is the root's only.
  const inputLength = op === 'allgather' || op === 'gather' ? perRank : count;
  const input = op === 'scatter' && rank !== kRoot ? null : makeInput(spec.dtype, inputLength, rank);
  const tensors = op === 'allreduce' ? spec.tensors : 1;
  const iterations = spec.iterations > 0 ? spec.iterations : autoIterations(bytes, tensors);
  const warmup = spec.warmup ?? autoWarmup(bytes, tensors);
  // The reused output (every op takes one): as long as this rank's result, where the rank gets one.
  const result = expectedResult(op, layout);
  const reused = spec.fresh || !result ? undefined : allocShared(spec.dtype, result.length);
  const many = op === 'allreduce' && spec.tensors > 1;
  const outs = Array.from({ length: many ? spec.tensors : 0 }, () => (spec.fresh ? undefined : allocShared(spec.dtype, perRank)));
  // In place: each tensor is its own output, zeros while timed (see BenchSpec.inPlace); a reduce
  // off the root has no output and reduces its own zeros.
  const inPlace = spec.inPlace && kInPlaceOps.includes(op);
  const inputs = outs.map((o) => (inPlace ? (o as TypedArray) : (input as TypedArray)));
  // A reducescatter in place: the whole tensor is the input, its own rows the output (as NCCL's).
  const splitInPlace = inPlace && op === 'reducescatter';
  const tensor = inPlace
    ? splitInPlace
      ? allocShared(spec.dtype, inputLength)
      : (reused ?? allocShared(spec.dtype, inputLength))
    : input;
  const target = splitInPlace ? (tensor as TypedArray).subarray(rank * perRank, (rank + 1) * perRank) : reused;
  const name = `bench/${op}/${bytes}`;
  const step = () =>
    many ? runMany(rr, spec, inputs, outs, processSet) : runOne(rr, spec, op, name, tensor, target, processSet);
  let out: TypedArray | null = null;
  const warmupStart = performance.now();
  // The barriers around the timed loop are calls of another kind, and V8 re-optimizes the call
  // path after each of the first few it meets: the warm-up meets them too, between its parts.
  for (let part = 0; part < kWarmupParts; part++) {
    await rr.barrier(scope);
    const end = Math.round((warmup * (part + 1)) / kWarmupParts);
    for (let i = Math.round((warmup * part) / kWarmupParts); i < end; i++) out = await step();
  }
  const warmupUs = warmup > 0 ? ((performance.now() - warmupStart) * 1000) / warmup : 0;
  await rr.barrier(scope);
  const times = new Float64Array(iterations);
  const statsBefore = rr.stats();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  let last = start;
  for (let i = 0; i < iterations; i++) {
    out = await step();
    const now = performance.now();
    times[i] = (now - last) * 1000;
    last = now;
  }
  const timeUs = ((last - start) * 1000) / iterations;
  const cpu = process.cpuUsage(cpuBefore);
  const statsAfter = rr.stats();
  times.sort();
  await rr.barrier(scope);
  if (inPlace && spec.check) {
    for (const buffer of many ? inputs : [tensor as TypedArray]) buffer.set(input as never);
    out = await step();
  }
  const ok = spec.check ? checkOutput(op, out, layout, spec.dtype) : null;
  const total = count * (many ? spec.tensors : 1);
  return {
    op,
    bytes: total * element,
    count: total,
    iterations,
    timeUs,
    medianUs: times[Math.floor((iterations - 1) / 2)] ?? timeUs,
    warmup,
    warmupUs,
    cpuUs: (cpu.user + cpu.system) / iterations,
    ok,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    controlMessages: (statsAfter.controlSentMessages - statsBefore.controlSentMessages) / iterations,
    controlBytes: (statsAfter.controlSentBytes - statsBefore.controlSentBytes) / iterations,
  };
}

async function main(): Promise<void> {
  const specPath = process.argv[2];
  if (!specPath) throw new Error('usage: rank.js <spec.json>');
  const spec = JSON.parse(readFileSync(specPath, 'utf8')) as BenchSpec;
  const rr = await RingReduce.init();
  const rows: BenchRow[] = [];
  const step: BenchRow[] = [];
  let idleCpuMs = 0;
  let set: ProcessSet | undefined;
  try {
    if (spec.setRanks > 0) set = await rr.addProcessSet(Array.from({ length: spec.setRanks }, (_, r) => r));
    const member = !set || set.includes(rr.rank());
    if (member) for (const op of spec.ops) for (const bytes of spec.sizes) rows.push(await measure(rr, spec, op, bytes, set));
    if (member && spec.step) {
      const gradients: BenchSpec = { ...spec, dtype: 'float32', compression: 'none', tensors: kStepTensors };
      step.push(await measure(rr, gradients, 'allreduce', kStepTensorBytes, set));
      step.push(await measure(rr, { ...gradients, tensors: 1 }, 'allreduce', kStepTensors * kStepTensorBytes, set));
      step.push(await measure(rr, { ...gradients, grouped: true }, 'allreduce', kStepTensorBytes, set));
    }
    // The others wait for the members to finish, so that every rank's idle probe starts together.
    await rr.barrier();
    // An idle job must use no CPU: measure this process (both threads) while nothing is pending.
    await new Promise((resolve) => setTimeout(resolve, kIdleSettleMs));
    const before = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, kIdleProbeMs));
    const used = process.cpuUsage(before);
    idleCpuMs = (used.user + used.system) / 1000;
  } finally {
    await rr.shutdown();
  }
  const member = !set || set.includes(rr.rank());
  const report: BenchReport = { rank: rr.rank(), size: set ? set.size() : rr.size(), member, rows, idleCpuMs };
  if (spec.step) report.step = step;
  writeFileSync(join(spec.outDir, `rank.${rr.rank()}.json`), JSON.stringify(report));
}

await main();
