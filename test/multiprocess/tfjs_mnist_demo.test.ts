/** The README's demo, end to end on 2 ranks with a reduced number of steps. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describe, runJob } from './fixtures/tfjs_ringrun.js';

test('the MNIST demo trains on 2 ranks and ends with identical weights', { timeout: 120_000 }, async () => {
  const job = await runJob(2, 'dist/examples/mnist/train.js', ['--epochs', '2', '--steps', '15'], 90_000);
  assert.equal(job.status, 0, describe(job));
  const out = job.stdout;
  assert.match(out, /\[0\] epoch 1\/2 +loss \d\.\d+ +accuracy \d\.\d+ .* samples\/s/);
  assert.match(out, /\[0\] epoch 2\/2 /);
  assert.match(out, /\[0\] test accuracy 0\.\d+/);
  assert.match(out, /\[0\] weights checksum sha256:[0-9a-f]{16}: identical on all 2 rank\(s\)/);
  assert.doesNotMatch(out, /\[1\] epoch/, 'only rank 0 logs progress');
});
