/**
 * The start-up measurement of the cost model (engine/cost_probe.ts) on real in-thread ranks over
 * the memory transport: from 8 ranks rank 0 and rank N/2 ping-pong and every rank ends with rank
 * 0's figures; fewer ranks, 'off' and given figures send nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CostModelSetting } from '../../src/core/config.js';
import { jobCostModel } from '../../src/engine/cost_probe.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { onEveryRank } from './support/ranks.js';

/** Records the peers a rank sends to. */
function peersSentTo(t: Transport): { transport: Transport; peers: Set<number> } {
  const peers = new Set<number>();
  const transport = Object.create(t) as Transport;
  transport.send = (peer, tag, data) => {
    peers.add(peer);
    return t.send(peer, tag, data);
  };
  return { transport, peers };
}

async function probe(n: number, setting: CostModelSetting) {
  const world = createMemoryWorld(n, { delivery: 'microtask', ioTimeoutMs: 5000 });
  const watched = world.map(peersSentTo);
  const models = await onEveryRank(
    watched.map((w) => w.transport),
    (t) => jobCostModel(t, setting),
  );
  await world.closeAll();
  return { models, peers: watched.map((w) => [...w.peers].sort((a, b) => a - b)) };
}

describe('the cost probe', () => {
  it('from 8 ranks: ranks 0 and N/2 measure, every rank gets the same figures', async () => {
    for (const n of [8, 9]) {
      const { models, peers } = await probe(n, 'measure');
      for (const model of models) assert.deepEqual(model, models[0], `N=${n}`);
      const measured = models[0];
      if (measured !== undefined) {
        for (const x of [measured.alpha, measured.beta]) assert.ok(Number.isFinite(x) && (x as number) > 0, `N=${n}: ${x}`);
      }
      // Rank 0 pings N/2 and sends down the binomial tree (relative ranks 1, 2, 4, 8); N/2 only echoes and forwards.
      const tree = (v: number) => [1, 2, 4, 8].filter((m) => m < n && v + m < n && (v === 0 || m < (v & -v))).map((m) => v + m);
      assert.deepEqual(
        peers[0],
        [...new Set([n >> 1, ...tree(0)])].sort((a, b) => a - b),
      );
      assert.deepEqual(
        peers[n >> 1],
        [...new Set([0, ...tree(n >> 1)])].sort((a, b) => a - b),
      );
    }
  });

  it('below 8 ranks, off, or given figures: nothing is sent', async () => {
    for (const [n, setting, expected] of [
      [4, 'measure', undefined],
      [7, 'measure', undefined],
      [8, 'off', undefined],
      [8, { alpha: 2e-5, gamma: 1e-10 }, { alpha: 2e-5, gamma: 1e-10 }],
    ] as const) {
      const { models, peers } = await probe(n, setting);
      for (const model of models) assert.deepEqual(model, expected);
      for (const sent of peers) assert.deepEqual(sent, [], `N=${n} ${JSON.stringify(setting)}`);
    }
  });
});
