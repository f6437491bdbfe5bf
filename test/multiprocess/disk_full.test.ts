/**
 * A full disk where ringreduce writes: each rank's timeline (RINGREDUCE_TIMELINE) and the rank
 * logs of --output-dir are /dev/full, whose writes fail with ENOSPC. The job must finish with the
 * right results and exit 0, each writer saying so once: one warning per rank for its timeline, one
 * from ringrun for all the rank logs. (The trace that ringrun --timeline merges: unit/timeline_files.test.ts.)
 * And a /dev/shm too small for the shared-memory lane (a private mount namespace with a 256 KiB
 * tmpfs there, root only): the 1 MiB allreduces go on over the socket, each rank warns once.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanEnv, cleanUp, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

function lines(text: string, pattern: RegExp): string[] {
  return text.split('\n').filter((line) => pattern.test(line));
}

describe('a full disk', { timeout: 60_000 }, () => {
  const dir = tempDir('ringreduce-disk-full-');
  after(() => cleanUp(dir));

  it('under the timelines and the rank logs: the job goes on, each writer warns once', async () => {
    for (const rank of [0, 1]) {
      symlinkSync('/dev/full', join(dir, `trace.rank${rank}.json`));
      symlinkSync('/dev/full', join(dir, `rank.${rank}.log`));
    }
    const run = new RingrunRun(
      ['-np', '2', '--output-dir', dir, '-x', `RINGREDUCE_TIMELINE=${join(dir, 'trace.json')}`, process.execPath, kFailureJob],
      cleanEnv({ DIR: dir, ITERATIONS: '5' }),
    );
    const result = await run.finished;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(run.count('done'), 2, result.stdout);
    for (const rank of [0, 1]) {
      const warned = lines(result.stdout + result.stderr, new RegExp(`^\\[${rank}\\] .*cannot write the timeline`));
      assert.equal(warned.length, 1, warned.join('\n'));
      assert.match(warned[0] as string, /trace\.rank\d\.json: ENOSPC: no space left on device, write; .*the job goes on$/);
    }
    const logs = lines(result.stderr, /^ringrun: cannot write .*rank\.\d\.log/);
    assert.equal(logs.length, 1, result.stderr);
    assert.match(
      logs[0] as string,
      /ENOSPC: no space left on device, write; the rank logs in .* may stop here, the job goes on$/,
    );
  });

  // unshare -m: this test's /dev/shm only, as Docker's --shm-size gives a container its own.
  const kTinyShm = [
    'unshare',
    '-m',
    '--propagation',
    'private',
    'sh',
    '-c',
    'mount -t tmpfs -o size=256k tmpfs /dev/shm && exec "$0" "$@"',
  ];
  const tinyShmSkip =
    spawnSync(kTinyShm[0] as string, [...kTinyShm.slice(1), 'true']).status === 0
      ? false
      : 'needs root to mount a tmpfs in a mount namespace';

  it('a /dev/shm too small for the shared-memory lane: the job goes on over the socket, each rank warns once', {
    skip: tinyShmSkip,
  }, async () => {
    const run = new RingrunRun(
      ['-np', '2', process.execPath, kFailureJob],
      cleanEnv({ DIR: dir, ITERATIONS: '8' }),
      30_000,
      kTinyShm,
    );
    const result = await run.finished;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(run.count('done'), 2, result.stdout);
    for (const rank of [0, 1]) {
      const warned = lines(result.stdout + result.stderr, new RegExp(`^\\[${rank}\\] .*shared-memory lane`));
      assert.equal(warned.length, 1, `${result.stdout}\n${result.stderr}`);
      assert.match(
        warned[0] as string,
        /the shared-memory lane to rank \d is off \(ENOSPC: no space left on device, write\): large messages .* take the socket/,
      );
    }
  });
});
