/**
 * Data-parallel training with TensorFlow.js: every rank fits the same model to its own shard of
 * the data; DistributedOptimizer averages the gradients of all ranks at every step, so the
 * weights stay identical everywhere. The model learns y = 3x - 1 from noisy samples.
 *
 *   npm run build
 *   node bin/ringrun.js -np 2 node dist/examples/tfjs_training.js
 *
 * It uses TF.js's WebAssembly backend (`npm install @tensorflow/tfjs @tensorflow/tfjs-backend-wasm`),
 * which reads its .wasm files from the package's dist/ folder on Node.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import * as rr from 'ringreduce';
import * as rrtf from 'ringreduce/tfjs';

const wasmDir = dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/package.json'));
setWasmPaths(`${join(wasmDir, 'dist')}/`);
await tf.setBackend('wasm');

await rr.init();
// The same 512 samples on every rank (a fixed seed); each rank trains on its shard of them.
const xs = tf.randomUniform([512, 1], -1, 1, 'float32', 42);
const ys = xs
  .mul(3)
  .sub(1)
  .add(tf.randomNormal([512, 1], 0, 0.05, 'float32', 7));
const xsMine = rrtf.shardTensor(xs);
const ysMine = rrtf.shardTensor(ys);

const model = tf.sequential({ layers: [tf.layers.dense({ units: 1, inputShape: [1] })] });
model.compile({ optimizer: new rrtf.DistributedOptimizer(tf.train.sgd(0.1 * rr.size())), loss: 'meanSquaredError' });
const history = await model.fit(xsMine, ysMine, {
  epochs: 20,
  batchSize: 32,
  verbose: 0,
  callbacks: [new rrtf.BroadcastGlobalVariablesCallback({ root: 0 }), new rrtf.MetricAverageCallback()],
});

const [kernel = NaN, bias = NaN] = model.getWeights().map((w) => w.dataSync()[0] ?? NaN);
const loss = Number(history.history.loss?.at(-1));
console.log(
  `rank ${rr.rank()}: y = ${kernel.toFixed(2)}x ${bias < 0 ? '-' : '+'} ${Math.abs(bias).toFixed(2)}, loss ${loss.toFixed(4)}`,
);
await rr.shutdown();
