/**
 * The MNIST demo in elastic mode with real processes (ringrun --elastic, 4 ranks, 4 epochs): one
 * rank SIGKILLs itself mid-training (the demo's --kill-worker/--kill-at-batch hook), the 3
 * survivors go back to the last commit (step 20; a commit every 4 steps) and finish: the job exits
 * 0, the test accuracy is at least 0.9 and every rank ends with the same weights.
 *
 * Twice, with different victims (a middle rank at step 22, then rank 0 at step 21) but the same
 * membership history (steps 0-19 committed on 4 ranks, the rest on 3): the steps redone after the
 * rollback compute what they must, so both runs end with the same weights, bit for bit.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kDemo = fileURLToPath(new URL('../../examples/mnist/train.js', import.meta.url));

interface Outcome {
  accuracy: number;
  digest: string;
  seconds: number;
}

async function elasticDemo(victim: string, killAt: number): Promise<Outcome> {
  const started = performance.now();
  const run = new RingrunRun(
    [
      '--elastic',
      '--min-np',
      '2',
      '-np',
      '4',
      'node',
      kDemo,
      '--elastic',
      '--epochs',
      '4',
      '--kill-worker',
      victim,
      '--kill-at-batch',
      String(killAt),
    ],
    cleanEnv(),
    60_000,
  );
  const finished = await run.finished;
  const output = `stdout:\n${finished.stdout}\nstderr:\n${finished.stderr}`;
  assert.equal(finished.code, 0, output);
  const rank = Number(victim.slice(1));
  assert.match(finished.stderr, new RegExp(`worker ${victim} \\(rank ${rank} of generation 1\\) was killed by SIGKILL; 3 left`));
  assert.match(finished.stdout, new RegExp(`worker ${victim} \\(rank ${rank}\\) kills itself \\(SIGKILL\\) at step ${killAt}`));
  assert.match(
    finished.stdout,
    /elastic: 3 ranks now \(generation 2\); back to the commit of step 20 \(epoch 2, sample 2560 of 8000\), 384 samples per step/,
    output,
  );
  assert.match(finished.stdout, /epoch 4\/4 +loss \d\.\d+ +3 ranks +step 74 /, output);
  assert.match(finished.stdout, /trained in [\d.]+ s with 3 rank\(s\) at the end, 1 change\(s\) of membership/, output);

  const accuracy = Number(/test accuracy (\d\.\d+)/.exec(finished.stdout)?.[1]);
  assert.ok(accuracy >= 0.9, `test accuracy ${accuracy}\n${output}`);

  // Every survivor prints its checksum under its worker name: renumbered 0..2 in their order.
  const survivors = ['w0', 'w1', 'w2', 'w3'].filter((w) => w !== victim);
  const digests = survivors.map((worker, newRank) => {
    const match = new RegExp(`worker ${worker} is rank ${newRank} of 3: weights checksum (sha256:[0-9a-f]{16})`).exec(
      finished.stdout,
    );
    assert.ok(match, `${worker} reports its checksum as rank ${newRank}\n${output}`);
    return match[1] as string;
  });
  assert.equal(new Set(digests).size, 1, `identical weights on every rank: ${digests.join(' ')}`);
  assert.match(finished.stdout, /weights checksum sha256:[0-9a-f]{16}: identical on all 3 rank\(s\)/);
  return { accuracy, digest: digests[0] as string, seconds: (performance.now() - started) / 1000 };
}

test('elastic MNIST: a rank SIGKILLed mid-training, 3 ranks finish with accuracy >= 0.9 and identical weights, as a run with the same history does', {
  timeout: 150_000,
}, async () => {
  const middle = await elasticDemo('w1', 22);
  const first = await elasticDemo('w0', 21);
  assert.equal(first.digest, middle.digest, 'the same membership history gives the same weights');
  assert.equal(first.accuracy, middle.accuracy);
  console.log(`runs: ${middle.seconds.toFixed(1)} s and ${first.seconds.toFixed(1)} s, test accuracy ${middle.accuracy}`);
});
