/**
 * ringreduce in the first programs people paste: `node --input-type=module -e "..."` and code
 * on stdin, alone and as 2 ranks under ringrun (the engine's worker must not inherit the entry
 * flags), with rr.backend() saying what runs; and a plain `node job.js` in an environment left
 * with RANK and WORLD_SIZE (a Kubernetes pod's), which must say at once which variables made it
 * join a job, say it again in its start-up error, and run alone with RINGREDUCE_SIZE=1.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';

import { freePort } from '../helpers/world.js';
import { cleanEnv, kBin, kFailureJob, tempDir } from './fixtures/ringrun_harness.js';

const kIndex = new URL('../../src/index.js', import.meta.url).href;
const kProgram = `
import * as rr from '${kIndex}';
await rr.init();
const sum = await rr.allreduce(new Float32Array([1]));
console.log('rank', rr.rank(), 'of', rr.size(), 'sum', sum[0], 'backend', rr.backend());
await rr.shutdown();
`;

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
  /** When each stderr chunk arrived, ms after the start. */
  stderrAt: { at: number; text: string }[];
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, stdin?: string): Promise<Ended> {
  const child = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const started = Date.now();
  const ended: Ended = { code: null, stdout: '', stderr: '', stderrAt: [] };
  child.stdout.setEncoding('utf8').on('data', (t: string) => (ended.stdout += t));
  child.stderr.setEncoding('utf8').on('data', (t: string) => {
    ended.stderr += t;
    ended.stderrAt.push({ at: Date.now() - started, text: t });
  });
  child.stdin.end(stdin ?? '');
  const limit = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(limit);
      resolve({ ...ended, code });
    }),
  );
}

describe('node --input-type=module', { timeout: 60_000 }, () => {
  it('-e and stdin, alone', async () => {
    const byEval = await run(process.execPath, ['--input-type=module', '-e', kProgram], cleanEnv());
    assert.equal(byEval.code, 0, byEval.stderr);
    assert.match(byEval.stdout, /^rank 0 of 1 sum 1 backend solo$/m);
    const byStdin = await run(process.execPath, ['--input-type=module'], cleanEnv(), kProgram);
    assert.equal(byStdin.code, 0, byStdin.stderr);
    assert.match(byStdin.stdout, /^rank 0 of 1 sum 1 backend solo$/m);
  });

  it('-e as 2 ranks under ringrun', async () => {
    const result = await run(
      process.execPath,
      [kBin, '-np', '2', process.execPath, '--input-type=module', '-e', kProgram],
      cleanEnv(),
    );
    assert.equal(result.code, 0, result.stderr);
    for (const rank of [0, 1])
      assert.match(result.stdout, new RegExp(`^\\[${rank}\\] rank ${rank} of 2 sum 2 backend tcp$`, 'm'));
  });
});

describe('RANK and WORLD_SIZE left in the environment', { timeout: 60_000 }, () => {
  const leftover = async () =>
    cleanEnv({
      RANK: '1',
      WORLD_SIZE: '4',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(await freePort()),
      DIR: tempDir('ringrun-leftover-'),
      MODE: 'loop',
      ITERATIONS: '1',
    });

  it('a plain node process says at once which variables made it a rank, and again in its error', async () => {
    const env = { ...(await leftover()), RINGREDUCE_START_TIMEOUT_MS: '2000' };
    const result = await run(process.execPath, [kFailureJob], env);
    assert.notEqual(result.code, 0);
    const warning =
      /WARN: joining a job as rank 1 of 4 because RANK=1, WORLD_SIZE=4 are set \(torchrun's variables, but TORCHELASTIC_RUN_ID is unset: torchrun did not set them\); set RINGREDUCE_SIZE=1 to run this process alone/;
    assert.match(result.stderr, warning);
    // At once: when init starts, not when its 2 s start-up timeout fails it (a loaded machine
    // may take seconds to start node itself, so time it against the failure, not the spawn).
    const first = result.stderrAt.find((chunk) => warning.test(chunk.text));
    const failed = result.stderrAt.find((chunk) => /TimeoutError/.test(chunk.text));
    assert.ok(first !== undefined && failed !== undefined, 'both the warning and the error were printed');
    assert.ok(failed.at - first.at >= 1500, `the warning came ${failed.at - first.at} ms before the error, not at once`);
    assert.match(
      result.stderr,
      /TimeoutError: .*\(this process is rank 1 of 4 because RANK=1, WORLD_SIZE=4 are set .*set RINGREDUCE_SIZE=1 to run this process alone\)/,
    );
  });

  it('RINGREDUCE_SIZE=1 runs it alone regardless', async () => {
    const result = await run(process.execPath, [kFailureJob], { ...(await leftover()), RINGREDUCE_SIZE: '1' });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^\{"rank":0,"size":1,/m);
    assert.match(result.stdout, /^done$/m);
    assert.doesNotMatch(result.stderr, /joining a job/);
  });
});
