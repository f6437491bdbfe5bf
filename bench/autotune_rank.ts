/**
 * One rank of `npm run bench:autotune` (bench/autotune.ts): the training step case (kStepTensors
 * named float32 allreduces of kStepTensorBytes, submitted together, awaited together) under the
 * settings the environment gives. With RINGREDUCE_AUTOTUNE=1 it steps until autotune is done,
 * then times; otherwise it warms up, then times. Rank 0 writes the result to the file named by
 * its first argument.
 */
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { RingReduce } from '../src/api/runtime.js';
import { allocShared } from '../src/core/dtypes.js';
import { kStepTensorBytes, kStepTensors } from './spec.js';

export interface AutotuneRankResult {
  /** Mean wall time per timed step. */
  msPerStep: number;
  /** Steps run before timing (warm-up, or autotune's search). */
  stepsBefore: number;
  /** The settings timed (autotune's choice, when on). */
  fusionThresholdBytes: number;
  burstHoldMs: number;
  trials: number;
  ok: boolean;
}

const [outPath, timedArg] = process.argv.slice(2);
const timed = Number(timedArg ?? 300);
const kWarmup = 50;
const kMaxSearchSteps = 20_000;

const rr = await RingReduce.init();
const elements = kStepTensorBytes / 4;
const input = new Float32Array(elements).fill(rr.rank() + 1);
const outs = Array.from({ length: kStepTensors }, () => allocShared('float32', elements) as Float32Array);
const step = () => Promise.all(outs.map((out, i) => rr.allreduce(input, { name: `grad${i}`, out })));
const autotune = rr.stats().autotune !== undefined;
/**
 * Whether every rank has seen autotune finish. Each rank applies the choice at the same place of
 * the agreed order, but may see it a step earlier or later than another (a step completes after
 * the place it ran at): the ranks agree on the step to stop at with a min of their flags.
 */
const flag = new Float32Array(1);
const allDone = async () => {
  flag[0] = rr.stats().autotune?.done ? 1 : 0;
  return (await rr.allreduce(flag, { name: 'autotune-done', op: 'min' }))[0] === 1;
};
let before = 0;
while (autotune ? !(await allDone()) && before < kMaxSearchSteps : before < kWarmup) {
  await step();
  before++;
}
// Every rank has applied the choice by now or does so before its next step; align the start.
await rr.barrier();
const start = performance.now();
for (let i = 0; i < timed; i++) await step();
const msPerStep = (performance.now() - start) / timed;
const expected = (rr.size() * (rr.size() + 1)) / 2;
const ok = outs.every((out) => out[0] === expected && out[elements - 1] === expected);
const state = rr.stats().autotune;
if (rr.rank() === 0 && outPath) {
  const result: AutotuneRankResult = {
    msPerStep,
    stepsBefore: before,
    fusionThresholdBytes: state?.settings.fusionThresholdBytes ?? Number(process.env.RINGREDUCE_FUSION_THRESHOLD_BYTES),
    burstHoldMs: state?.settings.burstHoldMs ?? Number(process.env.RINGREDUCE_BURST_HOLD_MS),
    trials: state?.trials ?? 0,
    ok,
  };
  writeFileSync(outPath, JSON.stringify(result));
}
await rr.shutdown();
