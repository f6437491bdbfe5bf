/**
 * The adapter against explicit runtimes: two ranks in this process (async paths only: a
 * synchronous collective would block the one thread both ranks share) and a job of size 1.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import {
  broadcastObject,
  broadcastVariables,
  DistributedOptimizer,
  MetricAverageCallback,
} from '../../src/adapters/tfjs/index.js';
import type { RingReduce } from '../../src/index.js';
import { startWorld, stopWorld } from '../helpers/world.js';

tf.enableProdMode();
await tf.setBackend('cpu');

let world: RingReduce[] = [];
let single: RingReduce[] = [];
before(async () => {
  world = await startWorld(2);
  single = await startWorld(1);
});
after(async () => {
  await stopWorld([...world, ...single]);
});

test('applyGradientsAsync applies the average of the ranks’ gradients on every rank', async () => {
  const results = await Promise.all(
    world.map(async (runtime, rank) => {
      const v = tf.variable(tf.zeros([2]));
      const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime });
      await optimizer.applyGradientsAsync([{ name: v.name, tensor: tf.tensor1d([rank, 2 * rank + 1]) }]);
      return Array.from(v.dataSync());
    }),
  );
  assert.deepEqual(results, [
    [-0.5, -2],
    [-0.5, -2],
  ]);
});

test('broadcastVariables and broadcastObject give every rank the root’s values', async () => {
  const results = await Promise.all(
    world.map(async (runtime, rank) => {
      const v = tf.variable(tf.fill([3], rank + 1));
      const flag = tf.variable(tf.tensor1d([rank === 1], 'bool'));
      await broadcastVariables([v, flag], { runtime, root: 1 });
      const object = await broadcastObject(rank === 1 ? { from: 1 } : undefined, { runtime, root: 1 });
      return { v: Array.from(v.dataSync()), flag: Array.from(flag.dataSync()), object };
    }),
  );
  for (const r of results) assert.deepEqual(r, { v: [2, 2, 2], flag: [1], object: { from: 1 } });
});

test('MetricAverageCallback averages numbers and scalar tensors, and disposes the tensors', async () => {
  const logsOf = (rank: number) => ({ loss: tf.scalar(rank * 2), acc: rank === 0 ? 0.5 : 1 });
  const all = world.map((_, rank) => logsOf(rank));
  const before = tf.memory().numTensors;
  await Promise.all(world.map((runtime, rank) => new MetricAverageCallback({ runtime }).onEpochEnd(0, all[rank])));
  for (const logs of all) assert.deepEqual(logs, { loss: 1, acc: 0.75 });
  assert.equal(tf.memory().numTensors, before - 2);
});

test('on a job of size 1 the optimizer behaves exactly like the one it wraps', () => {
  const [runtime] = single as [RingReduce];
  const plain = tf.train.adam(0.1);
  const wrapped = new DistributedOptimizer(tf.train.adam(0.1), { runtime });
  const [a, b] = [tf.variable(tf.tensor1d([1, -2])), tf.variable(tf.tensor1d([1, -2]))];
  for (let i = 0; i < 3; i++) {
    plain.minimize(() => a.square().sum() as tf.Scalar, false, [a]);
    wrapped.minimize(() => b.square().sum() as tf.Scalar, false, [b]);
  }
  assert.deepEqual(Array.from(b.dataSync()), Array.from(a.dataSync()));
  assert.equal(wrapped.iterations, 3);
  assert.equal(wrapped.getClassName(), 'Adam', 'saved models record the wrapped optimizer');
  assert.deepEqual(wrapped.getConfig(), plain.getConfig());
  wrapped.setLearningRate(0.2);
  assert.equal(wrapped.learningRate, 0.2);
});

test('instanceof tells a DistributedOptimizer from the optimizers tfjs recognises by duck typing', () => {
  const [runtime] = single as [RingReduce];
  const wrapped = new DistributedOptimizer(tf.train.sgd(0.1), { runtime });
  assert.ok(wrapped instanceof tf.Optimizer);
  assert.ok(wrapped instanceof DistributedOptimizer);
  assert.ok(!(tf.train.sgd(0.1) instanceof DistributedOptimizer));
  assert.throws(() => new DistributedOptimizer(wrapped, { runtime }), /already a DistributedOptimizer/);
  assert.throws(() => new DistributedOptimizer({} as tf.Optimizer, { runtime }), /must be a tf.Optimizer/);
});
