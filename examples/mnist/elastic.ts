/**
 * The demo in elastic mode (`--elastic`, under `ringrun --elastic`): a custom training loop under
 * rr.elastic.run. The model, its optimizer's state and the progress (epoch, samples of the epoch
 * done, steps) live in an rrtf.elastic.TfjsState, committed every `--commit-every` steps and at
 * the end of every epoch. When a rank fails, the survivors go back to the last commit, take rank
 * 0's state, recompute their part of the data from rr.rank() and rr.size() (onReset) and go on.
 *
 *   npm run build
 *   node bin/ringrun.js --elastic --min-np 2 -np 4 node dist/examples/mnist/train.js --elastic
 *   node bin/ringrun.js --elastic --min-np 2 -np 4 node dist/examples/mnist/train.js --elastic --kill-worker w1 --kill-at-batch 22
 *
 * Every epoch reads the training samples in its own order (a shuffle seeded by the epoch). A step
 * takes the next batchSize × size samples of that order, rank r the r-th batchSize of them, and
 * the progress is counted in samples: a step redone after a change of membership, with another
 * size, reads the samples that follow the last commit, none skipped or seen twice in an epoch. The
 * learning rate is a function of that progress and of the size too, so a redone step computes
 * what a step of the new membership must.
 */
import * as tf from '@tensorflow/tfjs';
import * as rr from 'ringreduce';
import * as rrtf from 'ringreduce/tfjs';
import { type Digits, kClasses, kImageSize, mulberry32 } from './data.js';
import { buildModel } from './model.js';
import type { TrainOptions } from './options.js';

const kOrderSeed = 7;
/** Rank 0's initial weights come from it: two runs with the same membership history end with the same weights. */
const kModelSeed = 2025;

export interface ElasticRun {
  model: tf.LayersModel;
  /** Wall time of the training loop, recoveries included. */
  seconds: number;
  /** Changes of membership this rank went through. */
  resets: number;
  /** Commits and the time they took on this rank. */
  commits: number;
  commitMs: number;
}

/** This rank's place in the job: recomputed after every change of membership. */
interface Shard {
  rank: number;
  size: number;
  /** Samples a step takes, over all ranks. */
  perStep: number;
}

export async function trainElastic(options: TrainOptions, train: Digits): Promise<ElasticRun> {
  const log = (line: string) => rr.rank() === 0 && console.log(line);
  // A step's partial sum of k batches would stay in the optimizer, outside the state, through a rollback.
  if (options.backwardPasses !== 1) throw new Error('--elastic trains with --backward-passes 1 only');
  const batch = options.batchSize;
  const model = buildModel(kModelSeed);
  const optimizer = new rrtf.DistributedOptimizer(tf.train.adam(options.lr), { compression: options.compression });
  const variables = model.trainableWeights.map((w) => w.read() as tf.Variable);
  // --steps caps the batches per epoch, as many steps of the job it starts with.
  const samplesPerEpoch = Math.min(train.count, (options.steps ?? Number.POSITIVE_INFINITY) * batch * rr.size());
  const state = new rrtf.elastic.TfjsState({ model, optimizer, epoch: 0, offset: 0, step: 0 });

  const shardOf = (): Shard => ({ rank: rr.rank(), size: rr.size(), perStep: batch * rr.size() });
  let shard = shardOf();
  let resets = 0;
  state.onReset(() => {
    shard = shardOf();
    resets++;
    log(
      `elastic: ${shard.size} ranks now (generation ${rr.runtime().generation()}); back to the commit of step ${state.step} ` +
        `(epoch ${state.epoch + 1}, sample ${state.offset} of ${samplesPerEpoch}), ${shard.perStep} samples per step`,
    );
  });
  log(
    `MNIST, elastic, on ${shard.size} rank(s), tfjs backend ${tf.getBackend()}: ${samplesPerEpoch} training samples per epoch, ` +
      `batch ${batch} per rank, ${options.epochs} epoch(s), a commit every ${options.commitEvery} steps`,
  );

  let order: { epoch: number; indices: Int32Array } | undefined;
  let commits = 0;
  let commitMs = 0;
  const commit = async () => {
    const t = performance.now();
    await state.commit();
    commitMs += performance.now() - t;
    commits++;
  };
  const started = performance.now();
  await rr.elastic.run(state, async (state) => {
    while (state.epoch < options.epochs) {
      if (order?.epoch !== state.epoch) order = { epoch: state.epoch, indices: epochOrder(train.count, state.epoch) };
      const epochStarted = performance.now();
      let lossSum = 0;
      let batches = 0;
      while (state.offset + shard.perStep <= samplesPerEpoch) {
        if (state.step === options.killAtBatch && rr.runtime().config.elasticWorker === options.killWorker) {
          console.log(`worker ${options.killWorker} (rank ${rr.rank()}) kills itself (SIGKILL) at step ${state.step}`);
          process.kill(process.pid, 'SIGKILL');
        }
        const progress = state.epoch + state.offset / samplesPerEpoch;
        rrtf.setLearningRate(optimizer, learningRate(options, shard.size, progress));
        const [xs, ys] = batchOf(train, order.indices, state.offset + shard.rank * batch, batch);
        try {
          const loss = await optimizer.minimizeAsync(
            () => tf.metrics.categoricalCrossentropy(ys, model.apply(xs) as tf.Tensor).mean() as tf.Scalar,
            true,
            variables,
          );
          lossSum += (await (loss as tf.Scalar).data())[0] as number;
          loss?.dispose();
          batches++;
        } finally {
          tf.dispose([xs, ys]);
        }
        // The step is done, counters included; then commit every few steps.
        state.offset += shard.perStep;
        state.step++;
        if (state.step % options.commitEvery === 0) await commit();
      }
      const [sum, count] = await rr.allreduce(new Float64Array([lossSum, batches]), { name: 'mnist.epoch.loss', op: 'sum' });
      const seconds = (performance.now() - epochStarted) / 1000;
      log(
        `epoch ${state.epoch + 1}/${options.epochs}  loss ${((sum as number) / Math.max(1, count as number)).toFixed(4)}  ` +
          `${shard.size} ranks  step ${state.step}  ${seconds.toFixed(2)} s`,
      );
      state.epoch++;
      state.offset = 0;
      await commit();
    }
  });
  return { model, seconds: (performance.now() - started) / 1000, resets, commits, commitMs };
}

/** The single-rank rate × size, reached by a linear warm-up over the first --warmup-epochs. */
function learningRate(options: TrainOptions, size: number, progress: number): number {
  const warm = options.warmupEpochs === 0 ? 1 : Math.min(1, progress / options.warmupEpochs);
  return options.lr * (1 + (size - 1) * warm);
}

/** The order an epoch reads the training samples in: the same on every rank, for every membership. */
function epochOrder(count: number, epoch: number): Int32Array {
  const indices = Int32Array.from({ length: count }, (_, i) => i);
  const random = mulberry32(kOrderSeed * 1_000_003 + epoch);
  for (let i = count - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [indices[i], indices[j]] = [indices[j] as number, indices[i] as number];
  }
  return indices;
}

/** Samples order[start, start + length) as tensors: images and one-hot labels. */
function batchOf(train: Digits, order: Int32Array, start: number, length: number): [tf.Tensor2D, tf.Tensor2D] {
  const images = new Float32Array(length * kImageSize);
  const labels = new Int32Array(length);
  for (let i = 0; i < length; i++) {
    const sample = order[start + i] as number;
    images.set(train.images.subarray(sample * kImageSize, (sample + 1) * kImageSize), i * kImageSize);
    labels[i] = train.labels[sample] as number;
  }
  const xs = tf.tensor2d(images, [length, kImageSize]);
  const ys = tf.tidy(() => tf.oneHot(tf.tensor1d(labels, 'int32'), kClasses).toFloat() as tf.Tensor2D);
  return [xs, ys];
}
