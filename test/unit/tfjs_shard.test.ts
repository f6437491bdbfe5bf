/** Sharding a data set by rank: ranges, arrays, tensors and tf.data datasets. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import { shardArray, shardDataset, shardTensor } from '../../src/adapters/tfjs/shard.js';
import { shardRange } from '../../src/adapters/tfjs/shard_math.js';
import { InvalidArgumentError } from '../../src/index.js';

await tf.setBackend('cpu');

test('shards are contiguous, disjoint and of equal size, dropping the remainder by default', () => {
  const ranges = [0, 1, 2].map((rank) => shardRange(10, { rank, size: 3 }));
  assert.deepEqual(ranges, [
    { start: 0, end: 3 },
    { start: 3, end: 6 },
    { start: 6, end: 9 },
  ]);
});

test('without dropRemainder the first ranks take one extra item and everything is covered', () => {
  const ranges = [0, 1, 2].map((rank) => shardRange(10, { rank, size: 3, dropRemainder: false }));
  assert.deepEqual(ranges, [
    { start: 0, end: 4 },
    { start: 4, end: 7 },
    { start: 7, end: 10 },
  ]);
  assert.deepEqual(shardRange(2, { rank: 3, size: 4, dropRemainder: false }), { start: 2, end: 2 });
});

test('bad ranks, sizes and lengths are refused with InvalidArgumentError', () => {
  assert.throws(() => shardRange(10, { rank: 3, size: 3 }), InvalidArgumentError);
  assert.throws(() => shardRange(10, { rank: 0, size: 0 }), /size must be a positive integer/);
  assert.throws(() => shardRange(-1, { rank: 0, size: 1 }), /length must be a non-negative integer/);
});

test('arrays, typed arrays and tensors are sliced along their first dimension', () => {
  assert.deepEqual(shardArray(['a', 'b', 'c', 'd', 'e'], { rank: 1, size: 2 }), ['c', 'd']);
  assert.deepEqual([...shardArray(Int32Array.of(1, 2, 3, 4), { rank: 1, size: 2 })], [3, 4]);
  const t = tf.tensor2d([
    [0, 0],
    [1, 1],
    [2, 2],
    [3, 3],
    [4, 4],
  ]);
  const mine = shardTensor(t, { rank: 1, size: 2 });
  assert.deepEqual(mine.arraySync(), [
    [2, 2],
    [3, 3],
  ]);
  tf.dispose([t, mine]);
});

test('a dataset shard takes every size-th element and yields the same count on every rank, every epoch', async () => {
  const source = tf.data.array([0, 1, 2, 3, 4, 5, 6, 7]);
  const size = 3;
  for (let epoch = 0; epoch < 2; epoch++) {
    const shards = await Promise.all(Array.from({ length: size }, (_, rank) => shardDataset(source, { rank, size }).toArray()));
    assert.deepEqual(shards, [
      [0, 3],
      [1, 4],
      [2, 5],
    ]);
  }
  const loose = await shardDataset(source, { rank: 0, size, dropRemainder: false }).toArray();
  assert.deepEqual(loose, [0, 3, 6]);
});

test('a dataset shard of tensors leaks none of the skipped elements', async () => {
  const source = tf.data.array([1, 2, 3, 4, 5]).map((x) => tf.scalar(x as number));
  const before = tf.memory().numTensors;
  const mine = await shardDataset(source, { rank: 1, size: 2 }).toArray();
  assert.deepEqual(
    mine.map((t) => (t as tf.Scalar).arraySync()),
    [2, 4],
  );
  tf.dispose(mine);
  assert.equal(tf.memory().numTensors, before);
});
