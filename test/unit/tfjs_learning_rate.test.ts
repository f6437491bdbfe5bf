/** The warm-up schedule and reading/setting the learning rate of tfjs optimizers. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import { getLearningRate, setLearningRate } from '../../src/adapters/tfjs/learning_rate.js';
import { warmupLearningRate } from '../../src/adapters/tfjs/warmup_schedule.js';

await tf.setBackend('cpu');

test('warm-up ramps linearly from target/size to target, then holds the target', () => {
  const spec = { target: 0.4, size: 4, warmupEpochs: 2 };
  assert.equal(warmupLearningRate(spec, 0), 0.1);
  assert.ok(Math.abs(warmupLearningRate(spec, 1) - 0.25) < 1e-12);
  assert.equal(warmupLearningRate(spec, 2), 0.4);
  assert.equal(warmupLearningRate(spec, 7.5), 0.4);
  assert.equal(warmupLearningRate({ target: 0.1, size: 1, warmupEpochs: 3 }, 1), 0.1, 'a single rank has nothing to warm up');
  assert.equal(warmupLearningRate({ ...spec, warmupEpochs: 0 }, 0), 0.4);
});

test('the learning rate of every built-in optimizer can be read and changed, and the change is used', () => {
  const optimizers = [
    tf.train.sgd(0.1),
    tf.train.momentum(0.1, 0.9),
    tf.train.adam(0.1),
    tf.train.adagrad(0.1),
    tf.train.adadelta(0.1),
    tf.train.adamax(0.1),
    tf.train.rmsprop(0.1),
  ];
  for (const optimizer of optimizers) {
    assert.equal(getLearningRate(optimizer), 0.1, optimizer.getClassName());
    setLearningRate(optimizer, 0.5);
    assert.equal(getLearningRate(optimizer), 0.5, optimizer.getClassName());
  }
  // SGD caches −rate in a tensor: check that a step really uses the new rate.
  const sgd = tf.train.sgd(1);
  setLearningRate(sgd, 0.25);
  const v = tf.variable(tf.scalar(1));
  sgd.applyGradients({ [v.name]: tf.scalar(2) });
  assert.equal(v.dataSync()[0], 0.5);
  v.dispose();
});

test('a negative or non-finite rate is refused', () => {
  assert.throws(() => setLearningRate(tf.train.sgd(0.1), -1), /finite number >= 0/);
  assert.throws(() => setLearningRate(tf.train.sgd(0.1), Number.NaN), /finite number >= 0/);
});
