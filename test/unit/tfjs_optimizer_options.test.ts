/**
 * DistributedOptimizer's backwardPassesPerStep and processSet, the other helpers' processSet, and
 * JoinCallback, against ranks in this process (async paths only: a synchronous collective
 * would block the one thread the ranks share) and a job of size 1.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import {
  broadcastVariables,
  DistributedOptimizer,
  JoinCallback,
  MetricAverageCallback,
  shardArray,
} from '../../src/adapters/tfjs/index.js';
import { InvalidArgumentError, type ProcessSet, type RingReduce } from '../../src/index.js';
import { startWorld, stopWorld } from '../helpers/world.js';

tf.enableProdMode();
await tf.setBackend('cpu');

let world: RingReduce[] = [];
let single: RingReduce[] = [];
/** Ranks 0 and 2 of `world`, as each rank holds it. */
let sets: ProcessSet[] = [];
before(async () => {
  world = await startWorld(3);
  single = await startWorld(1);
  sets = await Promise.all(world.map((runtime) => runtime.addProcessSet([0, 2])));
});
after(async () => {
  await stopWorld([...world, ...single]);
});

/** One call of `optimizer` with gradient `values` for `v`, the gradient disposed after. */
async function step(optimizer: DistributedOptimizer, v: tf.Variable, values: number[]): Promise<void> {
  const grad = tf.tensor1d(values);
  await optimizer.applyGradientsAsync([{ name: v.name, tensor: grad }]);
  grad.dispose();
}

test('backwardPassesPerStep 2 applies nothing at the first call, then the mean of both calls averaged over ranks', async () => {
  for (const average of [true, false]) {
    const results = await Promise.all(
      world.map(async (runtime, rank) => {
        const v = tf.variable(tf.zeros([2]));
        const options = { runtime, backwardPassesPerStep: 2, averageAggregatedGradients: average, name: `k2.${average}` };
        const optimizer = new DistributedOptimizer(tf.train.sgd(1), options);
        await step(optimizer, v, [rank, 1]);
        const first = Array.from(v.dataSync());
        await step(optimizer, v, [3 * rank, 3]);
        return { first, second: Array.from(v.dataSync()), iterations: optimizer.iterations };
      }),
    );
    // Calls sum to [4r, 4]; their mean [2r, 2]; averaged over r = 0, 1, 2: [2, 2] (the sum: [4, 4]).
    const expected = average ? [-2, -2] : [-4, -4];
    for (const r of results) assert.deepEqual(r, { first: [0, 0], second: expected, iterations: 1 });
  }
});

test('accumulating steps makes no tensor: the count stays flat from step to step', async () => {
  const ranks = world.map((runtime) => ({
    v: tf.variable(tf.zeros([3])),
    optimizer: new DistributedOptimizer(tf.train.sgd(0.1), { runtime, backwardPassesPerStep: 3, name: 'flat' }),
  }));
  // The ranks share this process's tfjs: count between calls, once every rank has made its own.
  const counts: number[] = [];
  for (let call = 0; call < 9; call++) {
    await Promise.all(ranks.map(({ v, optimizer }, rank) => step(optimizer, v, [rank, call, 1])));
    counts.push(tf.memory().numTensors);
  }
  assert.ok(
    counts.every((n) => n === counts[0]),
    `tensor counts vary: ${counts.join(' ')}`,
  );
  assert.equal(ranks[0]?.optimizer.iterations, 3);
});

test('a job of one rank with backwardPassesPerStep 2 applies the mean of every two calls', () => {
  const [runtime] = single as [RingReduce];
  const v = tf.variable(tf.tensor1d([0, 0]));
  const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, backwardPassesPerStep: 2 });
  for (const values of [
    [1, 2],
    [3, 6],
    [10, 10],
  ]) {
    optimizer.minimize(() => v.mul(tf.tensor1d(values)).sum() as tf.Scalar, false, [v]);
  }
  assert.deepEqual(Array.from(v.dataSync()), [-2, -4], 'the third call waits for a fourth');
  assert.equal(optimizer.iterations, 1);
});

test('a step whose calls pass other gradients is refused and dropped; the next step starts afresh', () => {
  const [runtime] = single as [RingReduce];
  const [a, b] = [tf.variable(tf.zeros([2]), true, 'acc_a'), tf.variable(tf.zeros([1]), true, 'acc_b')];
  const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, backwardPassesPerStep: 2 });
  optimizer.applyGradients([{ name: a.name, tensor: tf.ones([2]) }]);
  assert.throws(
    () => optimizer.applyGradients([{ name: b.name, tensor: tf.ones([1]) }]),
    /other gradients \[acc_b:1\].*\[acc_a:2\]/,
  );
  optimizer.applyGradients([{ name: b.name, tensor: tf.ones([1]) }]);
  optimizer.applyGradients([{ name: b.name, tensor: tf.ones([1]) }]);
  assert.deepEqual(Array.from(a.dataSync()), [0, 0]);
  assert.deepEqual(Array.from(b.dataSync()), [-1]);
});

test('bad backwardPassesPerStep and averageAggregatedGradients are refused', () => {
  const [runtime] = single as [RingReduce];
  for (const k of [0, -1, 1.5, Number.NaN]) {
    assert.throws(() => new DistributedOptimizer(tf.train.sgd(1), { runtime, backwardPassesPerStep: k }), InvalidArgumentError);
  }
  assert.throws(
    () => new DistributedOptimizer(tf.train.sgd(1), { runtime, averageAggregatedGradients: 'yes' as unknown as boolean }),
    /averageAggregatedGradients must be a boolean/,
  );
});

test("compression 'fp16' averages the gradients as halves; a bad compression is refused", async () => {
  // 1 + 2^-20 is 1 in fp16: the update shows whether the gradients travelled compressed.
  const fine = 1 + 2 ** -20;
  for (const compression of ['fp16', 'none'] as const) {
    const updates = await Promise.all(
      world.map(async (runtime) => {
        const v = tf.variable(tf.zeros([2]));
        const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, compression, name: `fp16.${compression}` });
        await step(optimizer, v, [fine, 3]);
        return Array.from(v.dataSync());
      }),
    );
    const want = compression === 'fp16' ? [-1, -3] : [-Math.fround(fine), -3];
    for (const update of updates) assert.deepEqual(update, want, compression);
  }
  const [runtime] = single as [RingReduce];
  assert.throws(
    () => new DistributedOptimizer(tf.train.sgd(1), { runtime, compression: 'fp8' as 'fp16' }),
    /compression must be 'none' or 'fp16', got fp8/,
  );
});

test("op 'adasum' combines each gradient tensor on its own; a job of 3 ranks refuses it", async () => {
  // In the set {0, 2}: a's gradients are orthogonal (their sum), b's equal (their average). One
  // Adasum over [a, b] as a whole would give 0.6 · [1, 1, 4] instead.
  const grads = [
    [[1, 0], [2]],
    [[0, 1], [2]],
  ];
  const results = await Promise.all(
    [0, 2].map(async (rank, i) => {
      const runtime = world[rank] as RingReduce;
      const processSet = sets[rank] as ProcessSet;
      const [a, b] = [tf.variable(tf.zeros([2])), tf.variable(tf.zeros([1]))];
      const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, processSet, op: 'adasum', name: 'adasum' });
      const [ga, gb] = (grads[i] as number[][]).map((g) => tf.tensor1d(g));
      await optimizer.applyGradientsAsync([
        { name: a.name, tensor: ga as tf.Tensor },
        { name: b.name, tensor: gb as tf.Tensor },
      ]);
      tf.dispose([ga, gb]);
      return [Array.from(a.dataSync()), Array.from(b.dataSync())];
    }),
  );
  for (const r of results) assert.deepEqual(r, [[-1, -1], [-2]]);
  const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime: world[0] as RingReduce, op: 'adasum' });
  await assert.rejects(step(optimizer, tf.variable(tf.zeros([1])), [1]), /has 3 ranks: adasum runs on 1, 2, 4, 8/);
  assert.throws(
    () => new DistributedOptimizer(tf.train.sgd(1), { op: 'max' as 'sum' }),
    /op must be 'average', 'sum' or 'adasum'/,
  );
});

test('with a process set, gradients, metrics, broadcasts and shards stay within the set', async () => {
  const results = await Promise.all(
    world.map(async (runtime, rank) => {
      const processSet = sets[rank] as ProcessSet;
      if (rank === 1) {
        // Not a member: refused before any collective.
        assert.throws(() => new DistributedOptimizer(tf.train.sgd(1), { runtime, processSet }), /rank 1 is not in process set/);
        assert.throws(() => new MetricAverageCallback({ runtime, processSet }), /not in process set/);
        return undefined;
      }
      const v = tf.variable(tf.zeros([1]));
      const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, processSet });
      await step(optimizer, v, [rank]);
      const logs = { loss: rank };
      await new MetricAverageCallback({ runtime, processSet }).onEpochEnd(0, logs);
      const w = tf.variable(tf.scalar(rank));
      await broadcastVariables([w], { runtime, processSet, root: 1 });
      return {
        v: Array.from(v.dataSync()),
        loss: logs.loss,
        w: w.dataSync()[0],
        shard: shardArray([0, 1, 2, 3, 4], { runtime, processSet, dropRemainder: false }),
      };
    }),
  );
  // The set {0, 2}: gradients 0 and 2 average to 1; its rank 1 is job rank 2.
  assert.deepEqual(results, [{ v: [-1], loss: 1, w: 2, shard: [0, 1, 2] }, undefined, { v: [-1], loss: 1, w: 2, shard: [3, 4] }]);
});

test('JoinCallback: ranks with fewer steps join, the others go on without them, and all end with the last one’s state', async () => {
  const results = await Promise.all(
    world.map(async (runtime, rank) => {
      const model = tf.sequential();
      model.add(tf.layers.dense({ inputShape: [1], units: 1, useBias: false, kernelInitializer: 'zeros' }));
      const optimizer = new DistributedOptimizer(tf.train.sgd(1), { runtime, name: 'join.gradients' });
      model.compile({ optimizer, loss: 'meanSquaredError' });
      const kernel = model.trainableWeights[0]?.read() as tf.Variable;
      const callback = new JoinCallback({ runtime });
      callback.setModel(model);
      const epochs: number[] = [];
      for (let epoch = 0; epoch < 2; epoch++) {
        // Rank r makes 3 − r steps of gradient 1 (2 − r in the second epoch), then joins.
        for (let s = 0; s < 3 - rank - epoch; s++) await step(optimizer, kernel, [1]);
        await callback.onEpochEnd();
        epochs.push(kernel.dataSync()[0] as number);
      }
      return { epochs, lastJoined: callback.lastJoined, iterations: optimizer.iterations };
    }),
  );
  // Epoch 1: three updates of −1 (averaged over 3, then 2, then 1 rank); epoch 2: two more.
  for (const r of results) assert.deepEqual(r, { epochs: [-3, -5], lastJoined: 0, iterations: 5 });
});
