/**
 * BroadcastGlobalVariablesCallback's argument: a number is the root (as Horovod's
 * BroadcastGlobalVariablesCallback(root_rank)), an object the options; anything else is refused
 * when the callback is made. In a job of one rank, root 1 does not exist: fit() must say so,
 * not broadcast from rank 0.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import { BroadcastGlobalVariablesCallback } from '../../src/adapters/tfjs/index.js';
import * as rr from '../../src/index.js';

tf.enableProdMode();
await tf.setBackend('cpu');

before(() => rr.init({ logLevel: 'error' }));
after(() => rr.shutdown());

function fitWith(callback: BroadcastGlobalVariablesCallback): Promise<tf.History> {
  const model = tf.sequential({ layers: [tf.layers.dense({ units: 1, inputShape: [2] })] });
  model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
  return model.fit(tf.ones([4, 2]), tf.ones([4, 1]), { epochs: 1, verbose: 0, callbacks: [callback] });
}

test('a number is the root: root 0 works, root 1 of a one-rank job is refused', async () => {
  await fitWith(new BroadcastGlobalVariablesCallback(0));
  await assert.rejects(fitWith(new BroadcastGlobalVariablesCallback(1)), { name: 'InvalidArgumentError' });
  await fitWith(new BroadcastGlobalVariablesCallback({ root: 0 }));
});

test('anything but a rank or an options object is refused at once', () => {
  for (const bad of [-1, 1.5, Number.NaN, 'rank 0', null]) {
    assert.throws(() => new BroadcastGlobalVariablesCallback(bad as never), { name: 'InvalidArgumentError' }, String(bad));
  }
});
