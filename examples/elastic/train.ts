/**
 * An elastic training loop (docs/elastic.md), small enough to read in one go: the state is a
 * step counter and a weight vector; every step averages a gradient over the ranks, applies it and
 * commits. Run it with ringrun --elastic; `--kill-worker w1 --kill-at 20` makes that worker
 * SIGKILL itself at step 20, and the survivors report how long they took to get back to a
 * committed step and what a commit costs.
 *
 *   npm run build
 *   node bin/ringrun.js --elastic --min-np 2 --max-np 4 -np 4 node dist/examples/elastic/train.js --kill-worker w1 --kill-at 20
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as rr from 'ringreduce';

const { values: options } = parseArgs({
  options: {
    steps: { type: 'string', default: '60' },
    weights: { type: 'string', default: '100000' },
    'kill-worker': { type: 'string' },
    'kill-at': { type: 'string', default: '20' },
  },
});
const steps = Number(options.steps);
const killAt = Number(options['kill-at']);
// Where the victim notes the time of its death, for the survivors' recovery figure.
const killedAtFile = join(tmpdir(), `ringreduce-elastic-killed-${process.env.RINGREDUCE_JOB_ID ?? 'job'}`);

await rr.init();
const state = new rr.elastic.ObjectState({ step: 0, weights: new Float32Array(Number(options.weights)) });
let lr = 0.1 / rr.size();
let resetAt: number | undefined;
state.onReset(() => {
  // The membership changed: the learning rate follows the number of ranks.
  lr = 0.1 / rr.size();
  resetAt = Date.now();
});
let commitMs = 0;
await rr.elastic.run(state, async (state) => {
  const gradient = new Float32Array(state.weights.length);
  while (state.step < steps) {
    if (state.step === killAt && process.env.RINGREDUCE_ELASTIC_WORKER === options['kill-worker']) {
      writeFileSync(killedAtFile, String(Date.now()));
      process.kill(process.pid, 'SIGKILL');
    }
    gradient.fill(rr.rank() + 1);
    const average = await rr.allreduce(gradient, { name: 'gradient', op: 'average' });
    for (let i = 0; i < state.weights.length; i++) (state.weights[i] as number) -= lr * (average[i] as number);
    state.step++;
    const t = performance.now();
    await state.commit();
    commitMs += performance.now() - t;
    // Only after this example's own kill (a rank may fail for other reasons too).
    if (resetAt !== undefined && rr.rank() === 0 && existsSync(killedAtFile)) {
      const killed = Number(readFileSync(killedAtFile, 'utf8'));
      console.log(`recovered: ${Date.now() - killed} ms from the kill to the first committed step of ${rr.size()} ranks`);
    }
    resetAt = undefined;
  }
});
if (rr.rank() === 0) {
  console.log(`${state.step} steps, ${rr.size()} ranks at the end, weights[0] = ${state.weights[0]}`);
  console.log(`commit: ${((commitMs / state.step) * 1000).toFixed(0)} us per step (${state.weights.length} float32 weights)`);
}
await rr.shutdown();
