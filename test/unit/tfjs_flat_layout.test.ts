/** FlatLayout and GradientBundle: packing a step's gradients into one buffer and back. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import { FlatLayout } from '../../src/adapters/tfjs/flat_layout.js';
import { disposeGradients, GradientBundle } from '../../src/adapters/tfjs/gradient_bundle.js';

await tf.setBackend('cpu');

test('a layout packs parts end to end and unpacks views of the same elements', () => {
  const layout = new FlatLayout([2, 0, 3]);
  assert.deepEqual(layout.offsets, [0, 2, 2]);
  assert.equal(layout.total, 5);
  const flat = layout.pack([[1, 2], [], Float32Array.of(3, 4, 5)], new Float32Array(5));
  assert.deepEqual([...flat], [1, 2, 3, 4, 5]);
  const views = layout.unpack(flat);
  assert.deepEqual(
    views.map((v) => [...v]),
    [[1, 2], [], [3, 4, 5]],
  );
  views[2]?.fill(9);
  assert.deepEqual([...flat], [1, 2, 9, 9, 9], 'unpack returns views, not copies');
});

test('a layout refuses parts or buffers of the wrong size', () => {
  const layout = new FlatLayout([2, 1]);
  assert.throws(() => layout.pack([[1, 2]], new Float32Array(3)), /expected 2 parts/);
  assert.throws(() => layout.pack([[1], [2]], new Float32Array(3)), /part 0 has 1 elements/);
  assert.throws(() => layout.pack([[1, 2], [3]], new Float32Array(4)), /target holds 4/);
  assert.throws(() => layout.unpack(new Int32Array(2)), /flat buffer holds 2/);
  assert.throws(() => new FlatLayout([1.5]), /not a non-negative integer/);
});

test('a layout adds parts into a running sum in place, checking sizes like pack', () => {
  const layout = new FlatLayout([2, 1]);
  const sum = layout.pack([[1, 2], [3]], new Float32Array(3));
  assert.equal(layout.accumulate([Float32Array.of(10, 20), [30]], sum), sum);
  assert.deepEqual([...sum], [11, 22, 33]);
  assert.throws(() => layout.accumulate([[1, 2]], sum), /expected 2 parts/);
  assert.throws(() => layout.accumulate([[1], [2]], sum), /part 0 has 1 elements/);
  assert.deepEqual([...sum], [11, 22, 33], 'a refused part adds nothing');
});

test('a gradient bundle names its layout by names and sizes, a missing gradient included', () => {
  const a = tf.tensor1d([1, 2]);
  const b = tf.scalar(3);
  assert.equal(
    new GradientBundle([
      { name: 'a', tensor: a },
      { name: 'b', tensor: null as unknown as tf.Tensor },
    ]).signature,
    'a:2,b:-',
  );
  assert.equal(new GradientBundle({ a, b }).signature, 'a:2,b:1');
  tf.dispose([a, b]);
});

test('a gradient bundle round-trips an array of named gradients, keeping shapes, order and missing ones', () => {
  const grads = [
    {
      name: 'a',
      tensor: tf.tensor2d([
        [1, 2],
        [3, 4],
      ]),
    },
    { name: 'b', tensor: null as unknown as tf.Tensor },
    { name: 'c', tensor: tf.tensor1d([5]) },
  ];
  const bundle = new GradientBundle(grads);
  const flat = bundle.packSync();
  assert.deepEqual([...flat], [1, 2, 3, 4, 5]);
  const back = bundle.unpack(flat.map((v) => v * 10)) as typeof grads;
  assert.deepEqual(
    back.map((g) => g.name),
    ['a', 'b', 'c'],
  );
  assert.deepEqual(back[0]?.tensor.shape, [2, 2]);
  assert.deepEqual(back[0]?.tensor.arraySync(), [
    [10, 20],
    [30, 40],
  ]);
  assert.equal(back[1]?.tensor, null);
  assert.deepEqual(back[2]?.tensor.arraySync(), [50]);
  disposeGradients(back);
  disposeGradients(grads);
});

test('a gradient bundle round-trips a map of gradients, asynchronously too', async () => {
  const grads = { w: tf.tensor1d([1, 2, 3]), b: tf.scalar(4) };
  const bundle = new GradientBundle(grads);
  const flat = await bundle.pack();
  assert.deepEqual([...flat], [1, 2, 3, 4]);
  const back = bundle.unpack(flat) as tf.NamedTensorMap;
  assert.deepEqual(Object.keys(back), ['w', 'b']);
  assert.deepEqual(back.b?.shape, []);
  assert.deepEqual(back.w?.arraySync(), [1, 2, 3]);
  disposeGradients(back);
  disposeGradients(grads);
});

test('a gradient bundle refuses non-float32 gradients, naming the variable', () => {
  const g = tf.tensor1d([1], 'int32');
  assert.throws(() => new GradientBundle({ counter: g }), /gradient of counter has dtype int32/);
  g.dispose();
});
