/**
 * DashboardCallback in model.fit: the epochs' and batches' metrics reach the process's training
 * channel (which a dashboard reporter listens to) as numbers, with the epoch, batch, counts and a
 * sample rate; and rank 0 draws a progress bar, as lines when its stream is not a terminal.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { BroadcastChannel } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { DashboardCallback } from '../../src/adapters/tfjs/index.js';
import type { Collectives } from '../../src/adapters/tfjs/runtime.js';
import { kTrainingChannel, type TrainingMetrics } from '../../src/observability/training_metrics.js';

tf.enableProdMode();
await tf.setBackend('cpu');

/** A runtime of which the callback only asks the rank. */
const rank0 = { rank: () => 0, size: () => 1 } as unknown as Collectives;

test('metrics to the dashboard channel and a progress bar on rank 0', async () => {
  const received: TrainingMetrics[] = [];
  const channel = new BroadcastChannel(kTrainingChannel);
  channel.onmessage = (event) => received.push((event as { data: TrainingMetrics }).data);
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  try {
    const model = tf.sequential({ layers: [tf.layers.dense({ units: 1, inputShape: [2] })] });
    model.compile({ optimizer: 'sgd', loss: 'meanSquaredError', metrics: ['mse'] });
    const callback = new DashboardCallback({ runtime: rank0, stream, reportEveryMs: 0, lineEveryMs: 10_000 });
    await model.fit(tf.ones([32, 2]), tf.ones([32, 1]), { epochs: 2, batchSize: 8, verbose: 0, callbacks: [callback] });
    // The channel delivers on a later turn, later still on a loaded machine: wait for the 8 batches and 2 epochs.
    for (let waited = 0; received.length < 10 && waited < 5000; waited += 20)
      await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    channel.close();
  }
  const batches = received.filter((m) => m.batch >= 0);
  const ends = received.filter((m) => m.batch === -1);
  assert.equal(batches.length, 8, 'every batch reported (reportEveryMs 0)');
  assert.deepEqual(
    ends.map((m) => m.epoch),
    [0, 1],
  );
  for (const m of received) {
    assert.equal(m.rank, 0);
    assert.equal(m.epochs, 2);
    assert.equal(m.batches, 4);
    assert.equal(typeof m.logs.loss, 'number', JSON.stringify(m.logs));
    assert.ok(!('size' in m.logs) && !('batch' in m.logs), 'batch bookkeeping is not a metric');
  }
  assert.ok(batches.every((m) => (m.samplesPerSecond ?? 0) > 0));
  // Not a terminal: each drawing is a line; the last of each epoch shows it complete, with the metrics.
  // The loss depends on the model's random initial weights: any number of digits before the point.
  assert.match(text, /epoch 1\/2 \[[█░]+\] 4\/4 batches .*\| loss \d+\.\d{4}/);
  assert.match(text, /epoch 2\/2 \[[█░]+\] 4\/4 batches/);
  assert.ok(!text.includes('\r'), 'no redrawing in place away from a terminal');
});

test('no bar off rank 0 unless asked', () => {
  const rank1 = { rank: () => 1, size: () => 2 } as unknown as Collectives;
  const quiet = new DashboardCallback({ runtime: rank1 }) as unknown as { bar: unknown };
  assert.equal(quiet.bar, undefined);
  const asked = new DashboardCallback({ runtime: rank1, progressBar: true }) as unknown as { bar: unknown };
  assert.notEqual(asked.bar, undefined);
});
