/** Barrier: unnamed and named, it waits for the last rank, the Sync twin; monitoredBarrier when every rank arrives (its failures: monitored_barrier.test.ts). */
import { type ConformanceCase, check } from './case.js';

/** Nothing of Node's: the cases run in browser ranks too. */
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const kLateMs = 150;

const basic: ConformanceCase = {
  name: 'barrier: unnamed and named calls, one after the other',
  async run(rr) {
    await rr.barrier();
    await rr.barrier({ name: 'barrier/named' });
    await rr.barrier();
    await rr.barrier({ name: 'barrier/named' });
  },
};

const waits: ConformanceCase = {
  name: `barrier: no rank leaves it before the last one, ${kLateMs} ms late, has entered`,
  minRanks: 2,
  async run(rr, rank, size) {
    // In step first, so that the ranks' clocks start together (to within a message's latency).
    await rr.barrier({ name: 'barrier/start' });
    const started = performance.now();
    if (rank === size - 1) await sleep(kLateMs);
    await rr.barrier({ name: 'barrier/late' });
    const waited = performance.now() - started;
    check(waited >= kLateMs - 50, 'the barrier', `was left after ${waited.toFixed(1)} ms`);
  },
};

const sync: ConformanceCase = {
  name: 'barrierSync: unnamed and named',
  needsSync: true,
  async run(rr) {
    rr.barrierSync();
    rr.barrierSync({ name: 'barrier-sync/named' });
  },
};

const monitored: ConformanceCase = {
  name: 'monitoredBarrier: every rank arrives; twice, with and without waitAll (its failures: monitored_barrier.test.ts)',
  async run(rr) {
    await rr.monitoredBarrier({ timeoutMs: 10_000 });
    await rr.monitoredBarrier({ timeoutMs: 10_000, waitAll: true });
  },
};

const monitoredSync: ConformanceCase = {
  name: 'monitoredBarrierSync: every rank arrives',
  needsSync: true,
  async run(rr) {
    rr.monitoredBarrierSync({ timeoutMs: 10_000 });
    rr.monitoredBarrierSync({ timeoutMs: 10_000, waitAll: true });
  },
};

export const barrierCases: readonly ConformanceCase[] = [basic, waits, sync, monitored, monitoredSync];
