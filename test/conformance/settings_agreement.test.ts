/**
 * Settings every rank must share, checked at start-up on real ranks (engine threads, TCP and the
 * web backend): a rank whose segment size, algorithms or cost model differs makes every rank's
 * init() fail with a MismatchError naming the setting and each rank's value, on a job on one host
 * and on one laid out over hosts; ranks that resolve the same values from different spellings
 * start and run as before.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';
import { MismatchError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { initWorldSettled, type PerRank, startWorld, stopWorld } from '../helpers/world.js';

/** Every rank's init() rejected with a MismatchError matching each of `patterns`; the message is the same on every rank. */
function assertAllRefused(results: PromiseSettledResult<RingReduce>[], patterns: RegExp[]): void {
  const messages = results.map((result, rank) => {
    assert.equal(result.status, 'rejected', `rank ${rank}'s init() should fail`);
    const error = (result as PromiseRejectedResult).reason as Error;
    assert.ok(error instanceof MismatchError, `rank ${rank}: ${error.name}: ${error.message}`);
    for (const pattern of patterns) assert.match(error.message, pattern, `rank ${rank}`);
    return error.message;
  });
  assert.equal(new Set(messages).size, 1, `every rank has the same message: ${messages.join(' | ')}`);
}

/** Shuts down the ranks that did start (none should), so a failing assertion leaves nothing running. */
async function stopStarted(results: PromiseSettledResult<RingReduce>[]): Promise<void> {
  await Promise.all(results.map((r) => (r.status === 'fulfilled' ? r.value.shutdown() : undefined)));
}

/** Rank r of a job of `size` laid out one rank per host: the start-up exchange's full path. */
const oneRankPerHost =
  (size: number): PerRank =>
  (rank) => ({ localRank: 0, localSize: 1, crossRank: rank, crossSize: size });

// Side by side: each world has its own store and job id, and each waits on its start-up mostly.
describe('settings every rank must share', { concurrency: true }, () => {
  test('a segment size on one rank only fails every rank, naming it and both values (one host)', async () => {
    const results = await initWorldSettled(2, { startTimeoutMs: 10_000 }, (rank) =>
      rank === 1 ? { segmentBytes: 1024 * 1024 } : {},
    );
    await stopStarted(results);
    assertAllRefused(results, [
      /RINGREDUCE_SEGMENT_BYTES \(init option segmentBytes\) differs between ranks: rank 0 has 4194304, rank 1 has 1048576/,
      /set it alike on every rank/,
    ]);
  });

  test('several settings differing over hosts are each named, with the ranks that have each value', async () => {
    const layout = oneRankPerHost(3);
    const results = await initWorldSettled(3, { startTimeoutMs: 10_000 }, (rank) => ({
      ...layout(rank),
      ...(rank === 2 && { algorithms: { allreduce: 'ring' }, costModel: { beta: 1e-10, alpha: 2e-5 } }),
    }));
    await stopStarted(results);
    assertAllRefused(results, [
      /RINGREDUCE_ALGORITHMS \(init option algorithms\) differs between ranks: ranks 0, 1 have unset, rank 2 has allreduce=ring/,
      /RINGREDUCE_COST_MODEL \(init option costModel\) differs between ranks: ranks 0, 1 have measure, rank 2 has alpha=0\.00002,beta=1e-10/,
      /set them alike on every rank/,
    ]);
    assert.doesNotMatch((results[0] as PromiseRejectedResult).reason.message, /SEGMENT_BYTES/);
  });

  test('the same values spelt differently agree, and the job runs', async () => {
    // `auto` for a collective is the engine's choice, as leaving it out is; figures in any key order.
    const world = await startWorld(2, { costModel: { alpha: 2e-5, beta: 1e-10 } }, (rank) =>
      rank === 0 ? { algorithms: { allreduce: 'auto' } } : { costModel: { beta: 1e-10, alpha: 2e-5 } },
    );
    try {
      const sums = await Promise.all(world.map((rr) => rr.allreduce(new Float32Array([rr.rank() + 1]))));
      assert.deepEqual(
        sums.map((s) => Array.from(s)),
        [[3], [3]],
      );
    } finally {
      await stopWorld(world);
    }
  });

  test('the web backend checks too (the exchange of browser ranks and Node ranks)', async () => {
    const store = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: new JobKey(undefined) });
    const { port } = await store.listen();
    const jobId = randomBytes(6).toString('hex');
    const options = (rank: number): InitOptions => ({
      rank,
      size: 2,
      backend: 'web',
      storeAddress: `127.0.0.1:${port}`,
      jobId,
      logLevel: 'error',
      startTimeoutMs: 10_000,
      ...(rank === 0 && { readyExchange: 'all-to-all' }),
    });
    try {
      const results = await Promise.allSettled([0, 1].map((rank) => RingReduce.init(options(rank))));
      await stopStarted(results);
      assertAllRefused(results, [/RINGREDUCE_READY_EXCHANGE .* rank 0 has all-to-all, rank 1 has auto/]);
    } finally {
      await store.close();
    }
  });
});
