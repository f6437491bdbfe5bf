/**
 * The burst gate: the engine holds its report while the caller is inside a burst of calls,
 * takes in the burst's submissions before reporting, and never holds longer than its limit;
 * and through the real caller/engine pair, a training step's calls run as one fused collective.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { BurstGate } from '../../src/engine/ready/burst_gate.js';
import { timelinePathFor } from '../../src/observability/timeline.js';
import { startWorld, stopWorld } from '../helpers/world.js';

const kIndex = 1;

function gate(maxHoldMs: number) {
  const signal = new Int32Array(new SharedArrayBuffer(8));
  const events: string[] = [];
  const g = new BurstGate(signal, kIndex, maxHoldMs, () => events.push('drain'));
  return { signal, events, g };
}

describe('BurstGate', () => {
  it('goes on at once, after draining, when no burst is open', () => {
    const { events, g } = gate(1000);
    g.whenIdle(() => events.push('then'));
    assert.deepEqual(events, ['drain', 'then']);
  });

  it('holds while the flag is up and goes on when the caller lowers it', async () => {
    const { signal, events, g } = gate(60_000);
    Atomics.store(signal, kIndex, 1);
    const done = new Promise<void>((resolve) => g.whenIdle(() => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(events, [], 'nothing may happen while the burst is open');
    Atomics.store(signal, kIndex, 0);
    Atomics.notify(signal, kIndex);
    await done;
    assert.deepEqual(events, ['drain']);
  });

  it('keeps holding across a notify that leaves the flag up (a new burst began)', async () => {
    const { signal, events, g } = gate(60_000);
    Atomics.store(signal, kIndex, 1);
    let called = false;
    const done = new Promise<void>((resolve) =>
      g.whenIdle(() => {
        called = true;
        resolve();
      }),
    );
    Atomics.notify(signal, kIndex);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(called, false);
    Atomics.store(signal, kIndex, 0);
    Atomics.notify(signal, kIndex);
    await done;
    assert.deepEqual(events, ['drain']);
  });

  it('goes on after maxHoldMs when the caller never lowers the flag', async () => {
    const { signal, events, g } = gate(50);
    Atomics.store(signal, kIndex, 1);
    const start = performance.now();
    await new Promise<void>((resolve) => g.whenIdle(() => resolve()));
    assert.ok(performance.now() - start >= 45, 'it may not give up before its limit');
    assert.deepEqual(events, ['drain']);
  });
});

describe('a burst of calls through the caller and the engine', () => {
  it('runs a cached training step of 30 named allreduces as one fused collective', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ringreduce-burst-'));
    const timeline = join(dir, 'trace.json');
    // A generous hold makes the outcome independent of how the threads are scheduled.
    const world = await startWorld(2, { burstHoldMs: 60_000, timeline });
    try {
      const step = (s: number) =>
        Promise.all(
          world.map((rr) =>
            Promise.all(
              Array.from({ length: 30 }, (_, i) =>
                // 4 KiB: each alone would go eagerly, but 30 at once pass the 64 KiB a report
                // carries eagerly on 2 ranks, so the step runs fused, as an execution.
                rr.allreduce(new Float32Array(1024).fill(rr.rank() + i + s), { name: `grad${i}` }),
              ),
            ),
          ),
        );
      for (let s = 0; s < 3; s++) {
        const results = await step(s);
        for (const perRank of results)
          for (const [i, out] of perRank.entries()) assert.equal(out[0], 2 * (i + s) + 1, `step ${s} tensor ${i}`);
      }
    } finally {
      await stopWorld(world);
    }
    try {
      for (let rank = 0; rank < 2; rank++) {
        const events = JSON.parse(readFileSync(timelinePathFor(timeline, rank), 'utf8')) as {
          name: string;
          args?: { bytes?: number };
        }[];
        const communicated = events.filter((e) => e.name === 'COMMUNICATE').map((e) => e.args?.bytes);
        // Step 0 goes through rank 0 (uncached); steps 1 and 2 must each be one collective of all 30.
        assert.deepEqual(communicated.slice(-2), [30 * 1024 * 4, 30 * 1024 * 4], `rank ${rank}: ${communicated.join(', ')}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
