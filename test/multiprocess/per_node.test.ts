/**
 * The per-node mode's start-up and fail-fast edges, with two launchers on this machine
 * (per_node_netns.test.ts runs them as separate nodes): a node that never comes is named by the
 * launcher waiting for it, which exits 124 at the start-up timeout; a launcher that gets SIGTERM
 * (a pod being deleted, scancel) or is SIGKILLed stops the ranks of the other node too.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../helpers/world.js';
import { assertNoneRunning, cleanEnv, cleanUp, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) cleanUp(d);
});

function node(rank: number, port: number, env: NodeJS.ProcessEnv, extra: string[] = []): RingrunRun {
  return new RingrunRun(
    [
      '--nnodes',
      '2',
      '--node-rank',
      String(rank),
      '--nproc-per-node',
      '1',
      '--rdzv-endpoint',
      `127.0.0.1:${port}`,
      ...extra,
      process.execPath,
      kFailureJob,
    ],
    env,
  );
}

describe('per-node start-up', { timeout: 30_000 }, () => {
  it('node 0 alone names the node that did not join and exits 124 at the start-up timeout', async () => {
    const started = Date.now();
    const result = await node(0, await freePort(), cleanEnv({ MODE: 'loop' }), ['--start-timeout', '1500ms']).finished;
    const took = Date.now() - started;
    assert.equal(result.code, 124, result.stderr);
    assert.match(
      result.stderr,
      /ringrun: node 1 of 2 did not join at the rendezvous endpoint 127\.0\.0\.1:\d+ within the start-up timeout/,
    );
    assert.ok(took < 5000, `took ${took} ms`);
  });

  it('node 1 alone says it cannot reach node 0 and exits 124', async () => {
    const result = await node(1, await freePort(), cleanEnv({ MODE: 'loop' }), ['--start-timeout', '1s']).finished;
    assert.equal(result.code, 124, result.stderr);
    assert.match(
      result.stderr,
      /could not reach the rendezvous endpoint 127\.0\.0\.1:\d+ \(node 0's ringrun\) within the start-up timeout/,
    );
  });

  it('two launchers claiming one node rank are refused', async () => {
    const port = await freePort();
    const env = cleanEnv({ MODE: 'loop', ITERATIONS: '3' });
    const zero = node(0, port, env, ['--start-timeout', '1500ms']);
    await sleep(300);
    const twin = node(0, port, env, ['--start-timeout', '1500ms']);
    const [a, b] = await Promise.all([zero.finished, twin.finished]);
    assert.notEqual(a.code, 0);
    assert.match(`${a.stderr}${b.stderr}`, /the port is in use on this node|node rank 0 is claimed by two launchers/);
  });
});

describe('per-node fail-fast from the launchers', { timeout: 60_000 }, () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`${signal} to node 1's launcher stops the ranks of node 0 too`, async () => {
      const dir = tempDir('ringrun-per-node-signal-');
      dirs.push(dir);
      const port = await freePort();
      const env = cleanEnv({ DIR: dir, MODE: 'loop', RINGREDUCE_SECRET: 'shared' });
      const one = node(1, port, env);
      const zero = node(0, port, env);
      await zero.waitFor('node 0 in the loop', (r) => r.count('iteration 3') === 1);
      await one.waitFor('node 1 in the loop', (r) => r.count('iteration 3') === 1);
      const stoppedAt = Date.now();
      one.child.kill(signal);
      const result = await zero.finished;
      const took = result.endedAt - stoppedAt;
      if (signal === 'SIGTERM') {
        assert.equal(result.code, 143, result.stderr);
        assert.match(result.stderr, /ringrun: job failed: the ringrun of node 1 \(.*\) received SIGTERM/);
        assert.equal((await one.finished).code, 143);
      } else {
        // Node 0 sees its connection close, or its rank sees rank 1 go: either way it stops.
        assert.notEqual(result.code, 0, result.stderr);
        assert.match(result.stderr, /the ringrun of node 1 \(.*\) is gone|rank 0 exited with code 1/);
      }
      assert.ok(took < 8000, `node 0 ended ${took} ms after the ${signal}`);
      await sleep(500); // the orphaned rank of node 1 (SIGKILL) sees its peer go
      assertNoneRunning(dir, 2);
    });
  }
});
