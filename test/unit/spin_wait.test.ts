import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { waitForChange } from '../../src/api/spin_wait.js';

test('returns at once when the value already changed', () => {
  const signal = new Int32Array(new SharedArrayBuffer(4));
  signal[0] = 1;
  assert.equal(waitForChange(signal, 0, 0, 1000), true);
});

test('gives up at its deadline when nothing changes (the spin is bounded)', () => {
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const start = performance.now();
  assert.equal(waitForChange(signal, 0, 0, 30), false);
  const elapsed = performance.now() - start;
  assert.ok(elapsed >= 29 && elapsed < 5000, `waited ${elapsed} ms`);
});

test('wakes when another thread changes the value after the spin has ended', async () => {
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     setTimeout(() => { Atomics.store(workerData, 0, 7); Atomics.notify(workerData, 0); }, 50);`,
    { eval: true, workerData: signal },
  );
  await new Promise((resolve) => worker.once('online', resolve));
  assert.equal(waitForChange(signal, 0, 0, 10_000), true);
  assert.equal(signal[0], 7);
  await worker.terminate();
});
