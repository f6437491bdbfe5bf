/**
 * Checkpoints of the tfjs adapter, on plain @tensorflow/tfjs: saveModelToDir / loadModelFromDir
 * and the file IOHandlers round-trip the weights and the optimizer's state bit for bit, and
 * ModelCheckpointCallback saves on its root rank every few epochs. Then the in-memory checkpoints
 * of elastic training, TfjsState (two ranks in this process): commit and restore round-trip the
 * weights and slots without leaking tensors, and sync gives every rank rank 0's.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import {
  broadcastModel,
  checkpointInfo,
  DistributedOptimizer,
  elastic,
  fileLoadHandler,
  fileSaveHandler,
  loadModelFromDir,
  ModelCheckpointCallback,
  saveModelToDir,
} from '../../src/adapters/tfjs/index.js';
import type { RingReduce } from '../../src/index.js';
import { startWorld, stopWorld } from '../helpers/world.js';

tf.enableProdMode();
await tf.setBackend('cpu');

const dir = mkdtempSync(join(tmpdir(), 'ringreduce-tfjs-checkpoint-'));
let world: RingReduce[] = [];
before(async () => {
  world = await startWorld(2);
});
after(async () => {
  await stopWorld(world);
  rmSync(dir, { recursive: true, force: true });
});

function buildModel(seed: number): tf.Sequential {
  const model = tf.sequential();
  model.add(
    tf.layers.dense({
      inputShape: [6],
      units: 5,
      activation: 'relu',
      kernelInitializer: tf.initializers.glorotUniform({ seed }),
    }),
  );
  model.add(tf.layers.batchNormalization());
  model.add(
    tf.layers.dense({ units: 3, activation: 'softmax', kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 1 }) }),
  );
  return model;
}

function data(seed: number): [tf.Tensor2D, tf.Tensor2D] {
  const xs = tf.randomNormal([16, 6], 0, 1, 'float32', seed) as tf.Tensor2D;
  const labels = Array.from({ length: 16 }, (_, i) => (i * 7 + seed) % 3);
  const ys = tf.tidy(() => tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat() as tf.Tensor2D);
  return [xs, ys];
}

async function train(model: tf.LayersModel, seed: number, epochs = 1, callbacks: tf.CustomCallbackArgs[] | tf.Callback[] = []) {
  const [xs, ys] = data(seed);
  await model.fit(xs, ys, { epochs, batchSize: 4, shuffle: false, verbose: 0, callbacks });
  tf.dispose([xs, ys]);
}

/** Every weight's values, as plain arrays (bit-exact comparison of float32 values). */
function weightsOf(model: tf.LayersModel): number[][] {
  return model.getWeights().map((w) => Array.from(w.dataSync()));
}

async function slotsOf(optimizer: tf.Optimizer): Promise<Array<{ name: string; values: number[] }>> {
  const named = await optimizer.getWeights();
  const out = named.map(({ name, tensor }) => ({ name, values: Array.from(tensor.dataSync()) }));
  tf.dispose(named.map((w) => w.tensor).filter((t) => !(t instanceof tf.Variable)));
  return out;
}

test('saveModelToDir then loadModelFromDir round-trips the weights and the optimizer state exactly', async () => {
  const model = buildModel(1);
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  await train(model, 1, 2);
  const where = join(dir, 'round-trip');
  const result = await saveModelToDir(model, where, { epochs: 2 });
  assert.ok(existsSync(join(where, 'model.json')) && existsSync(join(where, 'weights.bin')));
  assert.ok((result.modelArtifactsInfo.weightDataBytes ?? 0) > 0);
  const json = JSON.parse(readFileSync(join(where, 'model.json'), 'utf8'));
  assert.deepEqual(json.weightsManifest[0].paths, ['weights.bin']);
  assert.equal(json.trainingConfig.optimizer_config.class_name, 'Adam');
  assert.deepEqual(await checkpointInfo(where), { epochs: 2 });

  const loaded = await loadModelFromDir(where);
  assert.deepEqual(weightsOf(loaded), weightsOf(model), 'weights, the batch-norm statistics included');
  assert.ok(loaded.optimizer, 'the loaded model is compiled with the saved optimizer');
  assert.deepEqual(await slotsOf(loaded.optimizer), await slotsOf(model.optimizer), 'iteration count and moments');
  // Both go on identically: the optimizer's state really is the saved one.
  await train(model, 2);
  await train(loaded, 2);
  assert.deepEqual(weightsOf(loaded), weightsOf(model));
  loaded.dispose();
  model.dispose();
});

test('the file IOHandlers work with model.save and tf.loadLayersModel; without the optimizer, the weights alone', async () => {
  const model = buildModel(3);
  model.compile({ optimizer: tf.train.sgd(0.1), loss: 'categoricalCrossentropy' });
  await train(model, 3);
  const where = join(dir, 'handlers');
  await model.save(fileSaveHandler(where));
  const loaded = await tf.loadLayersModel(fileLoadHandler(where));
  assert.deepEqual(weightsOf(loaded), weightsOf(model));
  assert.equal(loaded.optimizer, undefined, 'saved without a training config');
  assert.deepEqual(await checkpointInfo(where), { epochs: undefined });
  assert.equal(await checkpointInfo(join(dir, 'nothing-here')), undefined);

  const weightsOnly = join(dir, 'weights-only');
  await saveModelToDir(model, weightsOnly, { includeOptimizer: false });
  const again = await loadModelFromDir(weightsOnly);
  assert.deepEqual(weightsOf(again), weightsOf(model));
  assert.equal(again.optimizer, undefined);
  for (const m of [model, loaded, again]) m.dispose();
});

test('a model trained with DistributedOptimizer saves as its wrapped optimizer and loads without ringreduce', async () => {
  const model = buildModel(5);
  // No step is taken: the runtime is never asked for a collective.
  model.compile({
    optimizer: new DistributedOptimizer(tf.train.adam(0.01), { runtime: world[0] as RingReduce }),
    loss: 'categoricalCrossentropy',
  });
  const where = join(dir, 'distributed');
  await saveModelToDir(model, where);
  const loaded = await loadModelFromDir(where);
  assert.equal(loaded.optimizer.getClassName(), 'Adam');
  assert.equal(loaded.optimizer instanceof DistributedOptimizer, false);
  model.dispose();
  loaded.dispose();
});

test('saving leaks no tensor', async () => {
  const model = buildModel(7);
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'categoricalCrossentropy' });
  await train(model, 7);
  await saveModelToDir(model, join(dir, 'leak'));
  const before = tf.memory().numTensors;
  for (let i = 0; i < 5; i++) await saveModelToDir(model, join(dir, 'leak'));
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
});

test('ModelCheckpointCallback saves on its root rank every everyEpochs epochs, and nowhere else', async () => {
  const model = buildModel(9);
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'categoricalCrossentropy' });
  const saved: number[] = [];
  const root = new ModelCheckpointCallback({
    dir: (epoch) => {
      saved.push(epoch);
      return join(dir, `every-2-epoch-${epoch + 1}`);
    },
    everyEpochs: 2,
    runtime: { rank: () => 0 },
  });
  const other = new ModelCheckpointCallback({ dir: join(dir, 'not-root'), runtime: { rank: () => 1 } });
  await train(model, 9, 5, [root, other]);
  assert.deepEqual(saved, [1, 3], 'after epochs 2 and 4');
  assert.equal(root.lastSaved, join(dir, 'every-2-epoch-4'));
  assert.deepEqual(await checkpointInfo(join(dir, 'every-2-epoch-4')), { epochs: 4 });
  assert.equal(existsSync(join(dir, 'not-root')), false);
  assert.throws(
    () => new ModelCheckpointCallback({ dir: join(dir, 'x'), everyEpochs: 0 }),
    /everyEpochs must be a positive integer/,
  );
  model.dispose();
});

test('the resume recipe: rank 0 loads the checkpoint, broadcastModel gives every rank its weights and optimizer state', async () => {
  const trained = buildModel(50);
  trained.compile({ optimizer: tf.train.adam(0.01), loss: 'categoricalCrossentropy' });
  await train(trained, 50, 3);
  const where = join(dir, 'resume');
  await saveModelToDir(trained, where, { epochs: 3 });
  const resumed = await Promise.all(
    world.map(async (runtime) => {
      const info = runtime.rank() === 0 ? await checkpointInfo(where) : undefined;
      const loaded = info ? await loadModelFromDir(where) : undefined;
      const model = loaded ?? buildModel(60 + runtime.rank());
      const optimizer = new DistributedOptimizer(loaded?.optimizer ?? tf.train.adam(0.01), { runtime });
      model.compile({ optimizer, loss: 'categoricalCrossentropy' });
      const initialEpoch = await runtime.broadcastObject(info?.epochs ?? 0, { name: 'resume.epoch' });
      await broadcastModel(model, { runtime });
      return { model, optimizer, initialEpoch };
    }),
  );
  for (const { model, optimizer, initialEpoch } of resumed) {
    assert.equal(initialEpoch, 3);
    assert.deepEqual(weightsOf(model), weightsOf(trained));
    assert.deepEqual(await slotsOf(optimizer), await slotsOf(trained.optimizer));
  }
  trained.dispose();
  for (const { model } of resumed) model.dispose();
});

test('TfjsState: restore goes back to the committed weights and optimizer slots, bit for bit, with no tensor leaked', async () => {
  const runtime = world[0] as RingReduce;
  const model = buildModel(11);
  const optimizer = tf.train.adam(0.01);
  model.compile({ optimizer, loss: 'categoricalCrossentropy' });
  const state = new elastic.TfjsState({ model, optimizer, epoch: 0, seen: new Float64Array([0]) }, { runtime });
  await train(model, 11);
  state.epoch = 1;
  await state.commit();
  const committed = { weights: weightsOf(model), slots: await slotsOf(optimizer), iterations: optimizer.iterations };

  const tensors = tf.memory().numTensors;
  for (let i = 0; i < 10; i++) await state.commit();
  assert.equal(tf.memory().numTensors, tensors, 'commits keep typed arrays, not tensors');

  await train(model, 12, 2);
  state.epoch = 3;
  (state.seen[0] as number) += 5;
  assert.notDeepEqual(weightsOf(model), committed.weights);
  await state.restore();
  assert.equal(state.epoch, 1);
  assert.deepEqual([...state.seen], [0]);
  assert.deepEqual(weightsOf(model), committed.weights);
  assert.deepEqual(await slotsOf(optimizer), committed.slots);
  assert.equal(optimizer.iterations, committed.iterations);
  assert.equal(tf.memory().numTensors, tensors, 'restoring disposes the slots it replaces');
  for (let i = 0; i < 3; i++) await state.restore();
  assert.equal(tf.memory().numTensors, tensors);

  // The restored optimizer goes on as the committed one would: train a copy from the same commit.
  await train(model, 13);
  const afterRestore = weightsOf(model);
  await state.restore();
  await train(model, 13);
  assert.deepEqual(weightsOf(model), afterRestore);
  model.dispose();
});

test('TfjsState: sync gives every rank rank 0’s values, weights and slots (a rank without slots gets them)', async () => {
  const ranks = world.map((runtime, rank) => {
    const model = buildModel(20 + rank);
    const optimizer = tf.train.adam(0.01);
    model.compile({ optimizer, loss: 'categoricalCrossentropy' });
    return { runtime, model, optimizer, state: new elastic.TfjsState({ model, optimizer, step: rank * 10 }, { runtime }) };
  });
  const [r0, r1] = ranks as [(typeof ranks)[0], (typeof ranks)[0]];
  await train(r0.model, 30, 2); // rank 1 never trained: no slots yet
  const before = tf.memory().numTensors;
  await Promise.all(ranks.map((r) => r.state.sync()));
  assert.equal(r1.state.step, 0);
  assert.deepEqual(weightsOf(r1.model), weightsOf(r0.model));
  assert.deepEqual(await slotsOf(r1.optimizer), await slotsOf(r0.optimizer));
  assert.equal(r1.optimizer.iterations, r0.optimizer.iterations);
  // Rank 1 gained the slots (2 per weight) and nothing else.
  assert.equal(tf.memory().numTensors, before + 2 * r0.model.weights.filter((w) => w.trainable).length);
  // Before any commit, restore goes back to what the first sync gave.
  await train(r1.model, 31);
  await r1.state.restore();
  assert.deepEqual(weightsOf(r1.model), weightsOf(r0.model));
  // Both train on, identically.
  await train(r0.model, 32);
  await train(r1.model, 32);
  assert.deepEqual(weightsOf(r1.model), weightsOf(r0.model));
  for (const r of ranks) r.model.dispose();
});

test('TfjsState takes its optimizer from the compiled model when none is given', async () => {
  const runtime = world[0] as RingReduce;
  const model = buildModel(40);
  const state = new elastic.TfjsState({ model, step: 0 }, { runtime });
  assert.equal(state.optimizer, undefined);
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'categoricalCrossentropy' });
  assert.equal(state.optimizer, model.optimizer);
  await train(model, 40);
  await state.commit();
  const slots = await slotsOf(model.optimizer);
  await train(model, 41);
  await state.restore();
  assert.deepEqual(await slotsOf(model.optimizer), slots);
  assert.throws(() => new elastic.TfjsState({ model: {} as tf.LayersModel }, { runtime }), /model must be a tf.LayersModel/);
  model.dispose();
});
