/**
 * Data-parallel MNIST with TensorFlow.js and ringreduce: the README's demo.
 *
 *   npm run build
 *   node bin/ringrun.js -np 4 node dist/examples/mnist/train.js            # full run, ~1 minute
 *   node bin/ringrun.js -np 2 node dist/examples/mnist/train.js --epochs 1 --steps 20   # quick
 *   node bin/ringrun.js -np 4 node dist/examples/mnist/train.js --compression fp16     # gradients as fp16
 *   node bin/ringrun.js -np 4 node dist/examples/mnist/train.js --adasum               # Adasum, not averaging
 *   node bin/ringrun.js --elastic --min-np 2 -np 4 node dist/examples/mnist/train.js --elastic   # elastic.ts
 *
 * Each rank trains on its own quarter of the training set; DistributedOptimizer averages the
 * gradients over the ranks at every step (or combines them by Adasum, --adasum), so all ranks hold the same weights throughout. The
 * options are listed in options.ts.
 */
import * as tf from '@tensorflow/tfjs';
import * as rr from 'ringreduce';
import * as rrtf from 'ringreduce/tfjs';
import { useBackend } from './backend.js';
import { type Digits, kClasses, kImageSize, loadMnist, slice } from './data.js';
import { trainElastic } from './elastic.js';
import { buildModel } from './model.js';
import { parseOptions, type TrainOptions } from './options.js';
import { ProgressLogger } from './progress.js';
import { ResyncCallback } from './resync.js';

const kTestCount = 2000;
const kSplitSeed = 2024;

async function main(): Promise<void> {
  // The same program runs on Node ranks and in browser tabs (ringrun --browser), which have no process.env.
  const options = parseOptions(rr.programArgs(), globalThis.process?.env ?? {});
  const inBrowser = typeof process === 'undefined';
  await useBackend(inBrowser ? options.browserBackend : options.backend);
  await rr.init();
  const rank = rr.rank();
  const size = rr.size();
  const log = (line: string) => rank === 0 && console.log(line);

  // Every rank derives the same split, then keeps its own shard of it.
  const { train, test } = await loadMnist(kTestCount, kSplitSeed);
  if (options.elastic) return mainElastic(options, train, test);
  const backends = [...new Set(await rr.allgatherObject(tf.getBackend()))];
  const shard = rrtf.shardRange(train.count, { rank, size });
  const perRank = Math.min(shard.end - shard.start, (options.steps ?? Number.POSITIVE_INFINITY) * options.batchSize);
  const mine = slice(train, shard.start, shard.start + perRank);
  const [xs, ys] = tensorsOf(mine);
  const passes = options.backwardPasses;
  const perUpdate = passes === 1 ? 'per step' : `per update of ${passes} batches`;
  log(
    `MNIST on ${size} rank(s), tfjs backend ${backends.join(' and ')}: ${perRank} training samples per rank, ` +
      `batch ${options.batchSize} per rank (${options.batchSize * size * passes} ${perUpdate}), ${options.epochs} epoch(s)` +
      (options.compression === 'none' ? '' : `, gradients compressed to ${options.compression}`) +
      (options.adasum ? ', gradients combined by Adasum' : ''),
  );

  // The learning rate grows with the samples per update (× size × passes), reached by a warm-up.
  // Adasum's result is as large as one rank's gradient where the ranks agree: no × size (Horovod's advice).
  const lr = options.lr * (options.adasum ? 1 : size) * passes;
  const model = buildModel();
  model.compile({
    optimizer: new rrtf.DistributedOptimizer(tf.train.adam(lr), {
      backwardPassesPerStep: passes,
      compression: options.compression,
      op: options.adasum ? 'adasum' : 'average',
    }),
    loss: 'categoricalCrossentropy',
    metrics: ['accuracy'],
  });
  const progress = new ProgressLogger(perRank * size, options.epochs, rank === 0);
  const started = performance.now();
  await model.fit(xs, ys, {
    epochs: options.epochs,
    batchSize: options.batchSize,
    shuffle: true,
    verbose: 0,
    callbacks: [
      new rrtf.BroadcastGlobalVariablesCallback({ root: 0 }),
      new rrtf.MetricAverageCallback(),
      new rrtf.LearningRateWarmupCallback({ initialLearningRate: lr, warmupEpochs: options.warmupEpochs }),
      ...(options.dashboard ? [new rrtf.DashboardCallback()] : []),
      // Ranks on different backends drift apart: rank 0's weights again after each epoch.
      ...(backends.length > 1 ? [new ResyncCallback(log)] : []),
      progress,
    ],
  });
  const trainSeconds = (performance.now() - started) / 1000;
  log(`trained in ${trainSeconds.toFixed(1)} s: ${Math.round(progress.meanThroughput())} samples/s with ${size} rank(s)`);

  const accuracy = await testAccuracy(model, test, { rank, size });
  log(`test accuracy ${accuracy.toFixed(4)} (${kTestCount} images)`);
  const { digest, identical } = await compareWeights(model);
  log(`weights checksum ${digest}: ${identical ? `identical on all ${size} rank(s)` : 'DIFFERS between ranks'}`);

  tf.dispose([xs, ys]);
  await rr.shutdown();
  if (!identical) throw new Error('ranks ended with different weights');
  if (accuracy < options.minAccuracy) throw new Error(`test accuracy ${accuracy.toFixed(4)} is below ${options.minAccuracy}`);
}

/**
 * --elastic: the loop of elastic.ts under rr.elastic.run, then the same test and checksum by the
 * ranks left at the end; every rank also prints its checksum, under its worker name.
 */
async function mainElastic(options: TrainOptions, train: Digits, test: Digits): Promise<void> {
  const run = await trainElastic(options, train);
  const rank = rr.rank();
  const size = rr.size();
  const log = (line: string) => rank === 0 && console.log(line);
  log(
    `trained in ${run.seconds.toFixed(1)} s with ${size} rank(s) at the end, ${run.resets} change(s) of membership; ` +
      `commit: ${(run.commitMs / Math.max(1, run.commits)).toFixed(2)} ms each (${run.commits} commits)`,
  );
  const accuracy = await testAccuracy(run.model, test, { rank, size });
  log(`test accuracy ${accuracy.toFixed(4)} (${kTestCount} images)`);
  const { digest, identical } = await compareWeights(run.model);
  console.log(`worker ${rr.runtime().config.elasticWorker ?? '-'} is rank ${rank} of ${size}: weights checksum ${digest}`);
  log(`weights checksum ${digest}: ${identical ? `identical on all ${size} rank(s)` : 'DIFFERS between ranks'}`);
  await rr.shutdown();
  if (!identical) throw new Error('ranks ended with different weights');
  if (accuracy < options.minAccuracy) throw new Error(`test accuracy ${accuracy.toFixed(4)} is below ${options.minAccuracy}`);
}

function tensorsOf(digits: Digits): [tf.Tensor2D, tf.Tensor2D] {
  const xs = tf.tensor2d(digits.images, [digits.count, kImageSize]);
  const ys = tf.tidy(() => tf.oneHot(tf.tensor1d(digits.labels, 'int32'), kClasses).toFloat() as tf.Tensor2D);
  return [xs, ys];
}

/** Each rank scores its shard of the test set; one allreduce sums the counts. */
async function testAccuracy(model: tf.LayersModel, test: Digits, spec: { rank: number; size: number }): Promise<number> {
  const { start, end } = rrtf.shardRange(test.count, { ...spec, dropRemainder: false });
  const part = slice(test, start, end);
  const correct = tf.tidy(() => {
    const predicted = (model.predict(tf.tensor2d(part.images, [part.count, kImageSize])) as tf.Tensor).argMax(-1);
    return predicted.equal(tf.tensor1d(part.labels, 'int32')).sum().toFloat();
  });
  const counts = tf.stack([correct, tf.scalar(part.count)]);
  const total = await rrtf.allreduce(counts, { name: 'test.accuracy', op: 'sum' });
  const [right, all] = await total.data();
  tf.dispose([correct, counts, total]);
  return (right as number) / (all as number);
}

/** SHA-256 of all weights (Web Crypto: Node's and a browser's); every rank's digest is gathered and compared. */
async function compareWeights(model: tf.LayersModel): Promise<{ digest: string; identical: boolean }> {
  const parts: Uint8Array[] = [];
  for (const weight of model.getWeights()) {
    const values = (await weight.data()) as Float32Array;
    parts.push(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  }
  const all = new Uint8Array(parts.reduce((n, part) => n + part.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    all.set(part, offset);
    offset += part.byteLength;
  }
  const mine = new Uint32Array(await crypto.subtle.digest('SHA-256', all));
  const gathered = await rr.allgather(mine, { name: 'weights.checksum' });
  let identical = true;
  for (let i = 0; i < gathered.length; i++) identical &&= gathered[i] === mine[i % mine.length];
  const hex = Array.from(new Uint8Array(mine.buffer), (byte) => byte.toString(16).padStart(2, '0')).join('');
  return { digest: `sha256:${hex.slice(0, 16)}`, identical };
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  // Exit at once (the engine may still be connected): ringrun then stops the other ranks. A
  // browser rank has no process to exit: the rejection fails it.
  if (typeof process === 'undefined') throw error;
  process.exit(1);
});
