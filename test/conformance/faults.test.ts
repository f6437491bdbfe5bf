/**
 * Network faults injected on purpose between real engines over the real TCP transport
 * (test/helpers/fault_proxy.ts, one proxy in front of each rank): each ends in the right result
 * or in an error on every rank within its deadline, never in a hang or a wrong result. The
 * detection times print as test diagnostics; docs/failures.md ("Faults injected") has them.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';
import { RingReduceError } from '../../src/core/errors.js';
import { type ProxiedWorld, startProxiedWorld } from '../helpers/proxied_world.js';
import { withDeadline } from '../helpers/real_worlds.js';

const kSize = 3;
/** Short liveness settings for the faults only silence can reveal (the defaults take 8 s). */
const kFastLiveness: InitOptions = { ioTimeoutMs: 1500, heartbeatMs: 300 };

async function withWorld(options: InitOptions, body: (world: ProxiedWorld) => Promise<void>): Promise<void> {
  const world = await startProxiedWorld(kSize, options);
  try {
    await body(world);
  } finally {
    await world.close();
  }
}

/** Rank r's contribution: element i is r·1000 + i (sums are exact in float32 for these sizes). */
function input(rank: number, length: number): Float32Array {
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) out[i] = rank * 1000 + (i % 1000);
  return out;
}

/** Allreduces `length` floats on every rank and checks every result. */
async function checkedAllreduce(ranks: readonly RingReduce[], name: string, length: number): Promise<void> {
  const results = await Promise.all(ranks.map((rr, rank) => rr.allreduce(input(rank, length), { name })));
  const rankSum = (ranks.length * (ranks.length - 1) * 1000) / 2;
  for (const [rank, result] of results.entries()) {
    for (let i = 0; i < length; i += Math.max(1, length >> 6)) {
      assert.equal(result[i], rankSum + ranks.length * (i % 1000), `rank ${rank}, '${name}', element ${i}`);
    }
  }
}

/**
 * Every rank's `calls` reject with a RingReduceError within `ms` of `since`; returns the
 * messages and prints the time each rank took.
 */
async function everyRankFails(t: TestContext, calls: readonly Promise<unknown>[], since: number, ms: number): Promise<string[]> {
  const outcomes = await withDeadline(
    Promise.all(
      calls.map((call) =>
        call.then(
          () => null,
          (error: unknown) => ({ error, after: performance.now() - since }),
        ),
      ),
    ),
    ms + 2000,
    'the failing calls',
  );
  return outcomes.map((outcome, rank) => {
    assert.ok(outcome !== null, `rank ${rank}: the call should have failed`);
    assert.ok(outcome.error instanceof RingReduceError, `rank ${rank}: ${String(outcome.error)}`);
    assert.ok(outcome.after < ms, `rank ${rank} failed after ${outcome.after.toFixed(0)} ms (limit ${ms})`);
    t.diagnostic(`rank ${rank} after ${outcome.after.toFixed(0)} ms: ${outcome.error.name}: ${outcome.error.message}`);
    return outcome.error.message;
  });
}

/** A loop of small allreduces on every rank until one fails (or 15 s pass): one promise per rank. */
function loopUntilFailure(ranks: readonly RingReduce[]): Promise<unknown>[] {
  const until = performance.now() + 15_000;
  return ranks.map(async (rr, rank) => {
    for (let i = 0; performance.now() < until; i++) await rr.allreduce(input(rank, 16), { name: `loop.${i % 4}` });
  });
}

describe('faults injected between ranks (TCP through proxies)', { timeout: 60_000 }, () => {
  it('delay and jitter (20 ms + up to 20 ms) on every link: correct results, no failure, default settings', () =>
    withWorld({}, async ({ ranks, links }) => {
      for (const proxy of links()) proxy.delay(20, 20);
      for (const length of [1, 1000, 100_000]) await checkedAllreduce(ranks, `jitter.${length}`, length);
      const gathered = await Promise.all(ranks.map((rr, rank) => rr.allgather(Int32Array.of(rank, rank))));
      for (const g of gathered) assert.deepEqual([...g], [0, 0, 1, 1, 2, 2]);
    }));

  it('a slow link (2 MB/s from rank 0 to rank 1): correct results, no failure, default settings', () =>
    withWorld({}, async ({ ranks, link }) => {
      link(0, 1).limit(2_000_000);
      await checkedAllreduce(ranks, 'slow', 256 * 1024);
      assert.ok(link(0, 1).forwarded.in > 256 * 1024, 'the large allreduce went through the slow link');
    }));

  it('connections reset in the middle of a large allreduce: every rank fails at once', (t) =>
    withWorld({}, async ({ ranks, link, linksOf }) => {
      link(0, 1).limit(2_000_000);
      const calls = ranks.map((rr, rank) => rr.allreduce(input(rank, 1 << 20), { name: 'reset' }));
      await new Promise((resolve) => setTimeout(resolve, 300));
      const since = performance.now();
      for (const proxy of linksOf(1)) proxy.reset();
      await everyRankFails(t, calls, since, 2000);
    }));

  it("a host gone silent (no FIN, no RST): found by the others' pings", (t) =>
    withWorld(kFastLiveness, async ({ ranks, linksOf }) => {
      const calls = loopUntilFailure(ranks);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const since = performance.now();
      for (const proxy of linksOf(1)) proxy.silence();
      const messages = await everyRankFails(t, calls, since, 4000);
      for (const rank of [0, 2]) assert.match(messages[rank] as string, /rank 1\b/, `rank ${rank} names the silent rank`);
    }));

  it('a rank that stops reading (its buffers fill) during a large allreduce: every rank fails within the I/O deadline', (t) =>
    withWorld(kFastLiveness, async ({ ranks, link }) => {
      const calls = ranks.map((rr, rank) => rr.allreduce(input(rank, 1 << 20), { name: 'stuck' }));
      await new Promise((resolve) => setTimeout(resolve, 20));
      const since = performance.now();
      for (const from of [0, 2]) link(from, 1).stopReading('in');
      await everyRankFails(t, calls, since, 6000);
    }));

  it('a frame cut short, then the connection closed: every rank fails at once', (t) =>
    withWorld({}, async ({ ranks, link }) => {
      const calls = loopUntilFailure(ranks);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const since = performance.now();
      link(0, 1).truncateNext('in');
      await everyRankFails(t, calls, since, 2000);
    }));

  it('a corrupted frame header: the receiver refuses it, every rank fails at once, the third ranks naming the sender', (t) =>
    withWorld({}, async ({ ranks, link }) => {
      const calls = loopUntilFailure(ranks);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const since = performance.now();
      link(0, 1).corruptNext('in', 0);
      const messages = await everyRankFails(t, calls, since, 2000);
      // Rank 1 refused rank 0's frame and told rank 2; rank 0 only sees its link to rank 1 torn down.
      for (const rank of [1, 2]) assert.match(messages[rank] as string, /rank 0\b.*malformed frame/, `rank ${rank}`);
      assert.match(messages[0] as string, /rank 1\b/);
    }));
});
