/**
 * `npm run bench:autotune`: the training step case (bench/spec.ts) with autotune on against a
 * sweep of the fixed settings autotune searches (fusion threshold × burst hold), each a job of
 * its own started by ringrun, timed over the same number of steps. Prints a row per setting,
 * then autotune's choice, its time per step, and how far it is from the sweep's best.
 *
 *   npm run bench:autotune -- --ranks 2 --steps 300
 *   npm run bench:autotune -- --ranks 2 --steps 300 --log autotune.csv   (autotune's trials as CSV)
 *
 * The sweep and the autotune run share the machine with whatever else runs: compare them within
 * one run, and repeat when the load changes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { kBurstHoldGrid, kFusionThresholdGrid } from '../src/engine/tuning/tuned_settings.js';
import type { AutotuneRankResult } from './autotune_rank.js';
import { kStepTensorBytes, kStepTensors } from './spec.js';

const kRoot = fileURLToPath(new URL('../../', import.meta.url));

function runJob(ranks: number, steps: number, env: NodeJS.ProcessEnv, out: string): Promise<AutotuneRankResult> {
  const child = spawn(
    process.execPath,
    [
      join(kRoot, 'bin/ringrun.js'),
      '-np',
      String(ranks),
      '--',
      process.execPath,
      join(kRoot, 'dist/bench/autotune_rank.js'),
      out,
      String(steps),
    ],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('exit', (code) => {
      if (code !== 0) fail(new Error(`ringrun exited with ${code}`));
      else done(JSON.parse(readFileSync(out, 'utf8')) as AutotuneRankResult);
    });
  });
}

const label = (r: { fusionThresholdBytes: number; burstHoldMs: number }) =>
  `fusion ${r.fusionThresholdBytes === 0 ? 'off' : `${r.fusionThresholdBytes / 2 ** 20} MiB`}, hold ${r.burstHoldMs} ms`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { ranks: { type: 'string', default: '2' }, steps: { type: 'string', default: '300' }, log: { type: 'string' } },
  });
  const ranks = Number(values.ranks);
  const steps = Number(values.steps);
  const dir = mkdtempSync(join(tmpdir(), 'ringreduce-autotune-bench-'));
  try {
    console.log(
      `# autotune bench: ${ranks} processes, training step of ${kStepTensors} float32 allreduces of ${kStepTensorBytes / 1024} KiB, ${steps} timed steps per job`,
    );
    const sweep: AutotuneRankResult[] = [];
    for (const fusion of kFusionThresholdGrid) {
      for (const hold of kBurstHoldGrid) {
        const env = { RINGREDUCE_FUSION_THRESHOLD_BYTES: String(fusion), RINGREDUCE_BURST_HOLD_MS: String(hold) };
        const result = await runJob(ranks, steps, env, join(dir, `fixed-${fusion}-${hold}.json`));
        sweep.push(result);
        console.log(
          `fixed    ${label(result).padEnd(28)} ${result.msPerStep.toFixed(3)} ms/step${result.ok ? '' : ' (CHECK FAILED)'}`,
        );
      }
    }
    const env = {
      RINGREDUCE_AUTOTUNE: '1',
      RINGREDUCE_LOG_LEVEL: 'info',
      ...(values.log && { RINGREDUCE_AUTOTUNE_LOG: resolve(values.log) }),
    };
    const tuned = await runJob(ranks, steps, env, join(dir, 'autotune.json'));
    const best = sweep.reduce((a, b) => (b.msPerStep < a.msPerStep ? b : a));
    const fixedSame = sweep.find(
      (r) => r.fusionThresholdBytes === tuned.fusionThresholdBytes && r.burstHoldMs === tuned.burstHoldMs,
    );
    console.log(
      `autotune ${label(tuned).padEnd(28)} ${tuned.msPerStep.toFixed(3)} ms/step after ${tuned.stepsBefore} steps, ${tuned.trials} trials${tuned.ok ? '' : ' (CHECK FAILED)'}`,
    );
    console.log(
      `# sweep's best: ${label(best)} ${best.msPerStep.toFixed(3)} ms/step; autotune's choice ${Math.abs((tuned.msPerStep / best.msPerStep - 1) * 100).toFixed(1)} % ${tuned.msPerStep > best.msPerStep ? 'slower' : 'faster'}` +
        (fixedSame ? `; the sweep timed autotune's choice at ${fixedSame.msPerStep.toFixed(3)} ms/step` : ''),
    );
    return sweep.every((r) => r.ok) && tuned.ok ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
