/**
 * The two exchanges of ready rounds on real engines (memory transport, engines in this thread):
 * 8 ranks and 6 (not a power of two, so extra ranks fold in), a loop of cached allreduces (a
 * scalar that rides eagerly with the round, and a vector that runs an algorithm). Results are
 * right in both modes; each rank sends exactly N - 1 ready messages per round all-to-all and at
 * most ceil(log2 N) + 1 with recursive doubling; 'auto' picks by size; a cached tensor some
 * ranks stop submitting times out naming them (rank 0 learns who holds it through the tree); a
 * rank killed while the others wait in a round fails them all with the PeerFailureError naming it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RingReduce } from '../../src/api/runtime.js';
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { PeerFailureError, TimeoutError } from '../../src/core/errors.js';
import { kAllToAllMaxRanks } from '../../src/engine/ready/ready_exchange_mode.js';
import { readStats } from '../../src/engine/reporting/stats.js';
import { createMemoryWorld, type MemoryWorld } from '../../src/transport/memory/memory_transport.js';
import { LocalEngine } from '../helpers/local_engine.js';
import { bounded } from '../helpers/real_worlds.js';

/** First byte of a control message: its type (codec.ts): 'ready' and 'ready-step'. */
const kReadyTypes = new Set([2, 8]);

interface Counted {
  ranks: RingReduce[];
  links: LocalEngine[];
  world: MemoryWorld;
  /** Ready-round messages each rank has sent. */
  readySent: number[];
}

function start(size: number, options: InitOptions): Counted {
  const world = createMemoryWorld(size, { delivery: 'macrotask', jitter: { seed: size, maxHops: 2 } });
  const readySent = new Array<number>(size).fill(0);
  const links: LocalEngine[] = [];
  const ranks = world.map((transport, rank) => {
    const sendControl = transport.sendControl.bind(transport);
    transport.sendControl = (peer, payload) => {
      if (kReadyTypes.has(payload[0] as number)) readySent[rank]++;
      return sendControl(peer, payload);
    };
    const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', ...options }, {});
    const link = new LocalEngine(config, transport);
    links.push(link);
    return RingReduce.withEngine(config, link);
  });
  return { ranks, links, world, readySent };
}

const kSteps = 30;

async function cachedLoop({ ranks }: Counted): Promise<void> {
  const size = ranks.length;
  await Promise.all(
    ranks.map(async (rr, rank) => {
      for (let step = 0; step < kSteps; step++) {
        const [scalar, vector] = await Promise.all([
          rr.allreduce(new Float32Array([rank + step]), { name: 'loss' }),
          // 16 KiB: past the eager limit of 6 and 8 ranks (64 KiB / (N-1)).
          rr.allreduce(new Float32Array(4096).fill(rank), { name: 'grad' }),
        ]);
        const want = (size * (size - 1)) / 2;
        assert.equal(scalar[0], want + size * step, `step ${step} rank ${rank}: scalar`);
        assert.ok(vector[0] === want && vector[4095] === want, `step ${step} rank ${rank}: vector ${vector[0]}`);
      }
    }),
  );
}

for (const size of [8, 6]) {
  describe(`ready rounds on ${size} ranks`, () => {
    const perRound: Record<string, number> = {};
    for (const mode of ['all-to-all', 'recursive-doubling'] as const) {
      test(
        `${mode}: cached allreduces are right, with the ready messages per rank and round the exchange implies`,
        bounded(60_000, async () => {
          const w = start(size, { readyExchange: mode });
          try {
            await cachedLoop(w);
            const rounds = w.links.map((l) => l.engine.negotiation.rounds);
            assert.ok(
              rounds.every((r) => r === rounds[0]),
              `every rank closed as many rounds: ${rounds}`,
            );
            const closed = rounds[0] as number;
            assert.ok(closed >= kSteps - 1, `${closed} rounds`);
            const bound = mode === 'all-to-all' ? size - 1 : Math.ceil(Math.log2(size)) + 1;
            for (const [rank, sent] of w.readySent.entries()) {
              if (mode === 'all-to-all') assert.equal(sent, closed * bound, `rank ${rank}`);
              else assert.ok(sent <= closed * bound, `rank ${rank}: ${sent} messages in ${closed} rounds`);
            }
            perRound[mode] = w.readySent.reduce((a, b) => a + b, 0) / closed;
            // Eager scalars finished in their round on every rank (no algorithm run).
            assert.ok(w.links.every((l) => readStats(l.engine.stats.buffer).eager >= kSteps - 1));
          } finally {
            await Promise.all(w.ranks.map((rr) => rr.shutdown()));
          }
        }),
      );
    }
    test('recursive doubling sends fewer ready messages per round than all-to-all', () => {
      assert.ok((perRound['recursive-doubling'] as number) < (perRound['all-to-all'] as number), JSON.stringify(perRound));
    });
  });
}

test(
  "'auto' exchanges all-to-all up to kAllToAllMaxRanks ranks and by recursive doubling above",
  bounded(60_000, async () => {
    for (const size of [kAllToAllMaxRanks, kAllToAllMaxRanks + 2]) {
      const w = start(size, {});
      try {
        await Promise.all(w.ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
        await Promise.all(w.ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
        const rounds = w.links[1]?.engine.negotiation.rounds as number;
        const sent = w.readySent[1] as number;
        if (size <= kAllToAllMaxRanks) assert.equal(sent, rounds * (size - 1), `size ${size}`);
        else assert.ok(sent <= rounds * (Math.ceil(Math.log2(size)) + 1), `size ${size}: ${sent} in ${rounds}`);
      } finally {
        await Promise.all(w.ranks.map((rr) => rr.shutdown()));
      }
    }
  }),
);

test(
  'recursive doubling: a rank killed while the others wait in a round fails every survivor with its PeerFailureError',
  bounded(30_000, async () => {
    // The killed rank's own shutdown waits for the others' acknowledgement this long at most.
    const w = start(6, { readyExchange: 'recursive-doubling', ioTimeoutMs: 1000 });
    try {
      await Promise.all(w.ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
      await Promise.all(w.ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
      // Everyone but rank 3 (the partner of rank 2 and 1's step-2 partner) reports the next one.
      const survivors = w.ranks.flatMap((rr, rank) => (rank === 3 ? [] : [rr.allreduce(new Float32Array(4), { name: 'x' })]));
      await new Promise((resolve) => setTimeout(resolve, 50));
      w.world.kill(3);
      const outcomes = await Promise.allSettled(survivors);
      for (const outcome of outcomes) {
        assert.equal(outcome.status, 'rejected');
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        assert.ok(reason instanceof PeerFailureError, `${reason.name}: ${reason.message}`);
        assert.match(reason.message, /rank 3/);
      }
    } finally {
      await Promise.all(w.ranks.map((rr) => rr.shutdown().catch(() => {})));
    }
  }),
);

test(
  'recursive doubling: a cached tensor some ranks stop submitting fails on the others, naming the missing ranks',
  bounded(30_000, async () => {
    const w = start(10, { stallTimeoutMs: 800 });
    try {
      const all = () => Promise.all(w.ranks.map((rr) => rr.allreduce(new Float32Array(16), { name: 'cached/lonely' })));
      await all();
      await all();
      const missing = new Set([0, 3, 9]);
      const partial = w.ranks.flatMap((rr, rank) =>
        missing.has(rank) ? [] : [rr.allreduce(new Float32Array(16), { name: 'cached/lonely' })],
      );
      const messages = new Set<string>();
      for (const outcome of await Promise.allSettled(partial)) {
        assert.equal(outcome.status, 'rejected');
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        assert.ok(reason instanceof TimeoutError, `${reason.name}: ${reason.message}`);
        messages.add(reason.message);
      }
      assert.equal(messages.size, 1, [...messages].join(' | '));
      assert.match([...messages][0] as string, /ranks 0, 3, 9 did not submit it \(ranks 1, 2, 4, 5, 6, 7, 8 did\)/);
      const ok = await all();
      assert.ok(ok.every((out) => out[0] === 0));
    } finally {
      await Promise.all(w.ranks.map((rr) => rr.shutdown()));
    }
  }),
);

test(
  "recursive doubling: rank 0's decisions and cached rounds interleave the same way on every rank (jittered links)",
  bounded(60_000, async () => {
    for (const seed of [1, 2, 3]) {
      const size = 10;
      const world = createMemoryWorld(size, { delivery: 'macrotask', jitter: { seed, maxHops: 8 } });
      const ranks = world.map((transport, rank) => {
        const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error' }, {});
        return RingReduce.withEngine(config, new LocalEngine(config, transport));
      });
      try {
        await Promise.all(
          ranks.map(async (rr, rank) => {
            for (let step = 0; step < 15; step++) {
              // Cached ones agree in rounds; an unnamed one (never cached) and a new name each step go through rank 0.
              const [cached, unnamed, fresh] = await Promise.all([
                rr.allreduce(new Float32Array(64).fill(rank), { name: 'cached' }),
                rr.allreduce(new Float32Array(8).fill(step)),
                rr.broadcast(new Float32Array(4).fill(rank + step), { name: `new/${step}`, root: step % size }),
              ]);
              assert.equal(cached[63], 45, `seed ${seed} step ${step} rank ${rank}`);
              assert.equal(unnamed[0], size * step);
              assert.equal(fresh[0], (step % size) + step);
            }
          }),
        );
      } finally {
        await Promise.all(ranks.map((rr) => rr.shutdown()));
      }
    }
  }),
);

test(
  'a rank whose ready exchange differs from its peers fails the job at the first ready round, naming the setting',
  bounded(30_000, async () => {
    const size = 4;
    const world = createMemoryWorld(size, { delivery: 'macrotask' });
    const ranks = world.map((transport, rank) => {
      const readyExchange = rank === 2 ? 'all-to-all' : 'recursive-doubling';
      const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', readyExchange }, {});
      return RingReduce.withEngine(config, new LocalEngine(config, transport));
    });
    try {
      await Promise.all(ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
      const outcomes = await Promise.allSettled(ranks.map((rr) => rr.allreduce(new Float32Array(4), { name: 'x' })));
      const reasons = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as Error] : []));
      assert.ok(reasons.length > 0, 'the job broke');
      assert.ok(
        reasons.some((r) => r instanceof PeerFailureError && /RINGREDUCE_READY_EXCHANGE/.test(r.message)),
        reasons.map((r) => r.message).join(' | '),
      );
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
    }
  }),
);
