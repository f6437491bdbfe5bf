/**
 * The adapter against explicit runtimes: two ranks in this process (async paths only: a
 * synchronous collective would block the one thread both ranks share) and a job of size 1.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import {
  alltoall,
  broadcastObject,
  broadcastVariables,
  DistributedOptimizer,
  gather,
  MetricAverageCallback,
  reducescatter,
} from '../../src/adapters/tfjs/index.js';
import { InvalidArgumentError, type RingReduce } from '../../src/index.js';
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

test('reducescatter, alltoall and gather run on the runtime passed', async () => {
  const results = await Promise.all(
    world.map(async (runtime, rank) => {
      const rows = tf.tensor2d([rank, 10 * rank, 1, 2, 3, 4], [3, 2]);
      const scattered = await reducescatter(rows, { runtime, op: 'sum' });
      const { output, receivedSplits } = await alltoall(rows, { runtime, splits: rank === 0 ? [3, 0] : [1, 2] });
      const gathered = await gather(tf.tensor1d([rank === 0], 'bool'), { runtime, root: 1 });
      return {
        scattered: { shape: scattered.shape, data: Array.from(scattered.dataSync()) },
        received: { shape: output.shape, data: Array.from(output.dataSync()), receivedSplits },
        gathered: gathered && { dtype: gathered.dtype, data: Array.from(gathered.dataSync()) },
      };
    }),
  );
  assert.deepEqual(results, [
    {
      scattered: { shape: [2, 2], data: [1, 10, 2, 4] },
      received: { shape: [4, 2], data: [0, 0, 1, 2, 3, 4, 1, 10], receivedSplits: [3, 1] },
      gathered: null,
    },
    {
      scattered: { shape: [1, 2], data: [6, 8] },
      received: { shape: [2, 2], data: [1, 2, 3, 4], receivedSplits: [0, 2] },
      gathered: { dtype: 'bool', data: [1, 0] },
    },
  ]);
});

test('reducescatter, alltoall and gather refuse scalars, and reducescatter averages of int32 and bool, before any exchange', async () => {
  const [runtime] = single as [RingReduce];
  await assert.rejects(reducescatter(tf.scalar(1), { runtime }), InvalidArgumentError);
  await assert.rejects(alltoall(tf.scalar(1), { runtime }), InvalidArgumentError);
  await assert.rejects(gather(tf.scalar(1), { runtime }), /at least one dimension/);
  await assert.rejects(reducescatter(tf.tensor1d([1], 'int32'), { runtime }), /integer average would truncate/);
  await assert.rejects(reducescatter(tf.tensor1d([true], 'bool'), { runtime }), /not defined for bool/);
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
