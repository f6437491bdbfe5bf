import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kDefaultReclaimBytes, kMinReclaimBytes, SharedMemoryReclaimer } from '../../src/core/shared_memory_reclaimer.js';

const mib = 1024 * 1024;

/** A reclaimer with a counting collector; collections run on setImmediate, so `settle` waits for them. */
function counted(options: { adaptive?: boolean; thresholdBytes?: number } = {}) {
  let collections = 0;
  const reclaimer = new SharedMemoryReclaimer({ ...options, collect: () => collections++ });
  return {
    reclaimer,
    collections: () => collections,
    settle: () => new Promise((resolve) => setImmediate(resolve)),
  };
}

describe('SharedMemoryReclaimer', () => {
  it('collects once the fixed threshold of bytes has been let go of', async () => {
    const { reclaimer, collections, settle } = counted();
    for (let i = 0; i < 15; i++) reclaimer.release(16 * mib);
    await settle();
    assert.equal(collections(), 0);
    reclaimer.release(16 * mib);
    await settle();
    assert.equal(collections(), 1, `after ${kDefaultReclaimBytes / mib} MiB`);
  });

  it('adaptive: collects after twice the largest buffer, at least kMinReclaimBytes, at most the threshold', async () => {
    const { reclaimer, collections, settle } = counted({ adaptive: true });
    // 16 MiB buffers: every second one (32 MiB).
    for (let i = 0; i < 6; i++) {
      reclaimer.release(16 * mib);
      await settle();
    }
    assert.equal(collections(), 3);
    // 64 MiB buffers: every second one (128 MiB).
    reclaimer.release(64 * mib);
    await settle();
    assert.equal(collections(), 3);
    reclaimer.release(64 * mib);
    await settle();
    assert.equal(collections(), 4);
    // Small buffers: after kMinReclaimBytes.
    for (let i = 0; i < kMinReclaimBytes / mib - 1; i++) reclaimer.release(mib);
    await settle();
    assert.equal(collections(), 4);
    reclaimer.release(mib);
    await settle();
    assert.equal(collections(), 5);
    // Huge buffers: capped at the threshold (256 MiB), so one 300 MiB buffer collects at once.
    reclaimer.release(300 * mib);
    await settle();
    assert.equal(collections(), 6);
  });

  it('runs one collection at a time', async () => {
    const { reclaimer, collections, settle } = counted({ thresholdBytes: mib });
    reclaimer.release(mib);
    reclaimer.release(mib);
    reclaimer.release(mib);
    await settle();
    assert.equal(collections(), 1);
  });
});
