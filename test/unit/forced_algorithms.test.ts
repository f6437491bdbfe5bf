/**
 * RINGREDUCE_ALGORITHMS (init's `algorithms`): the setting's grammar and refusals, the choosers
 * it overrides at every rank count, the layouts it keeps off under 'auto', and, on a world of
 * real engines over the memory transport, that the forced algorithms are the ones on the wire:
 * each algorithm has its own pattern of peers and bytes, recorded from the transport's sends.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { allgatherAlgorithm } from '../../src/algorithms/allgather.js';
import { allreduceAlgorithm } from '../../src/algorithms/allreduce.js';
import { broadcastAlgorithm } from '../../src/algorithms/broadcast.js';
import { allgatherRunsHierarchically } from '../../src/algorithms/hierarchical_allgather.js';
import { allreduceRunsHierarchically } from '../../src/algorithms/hierarchical_allreduce.js';
import type { Hierarchy } from '../../src/algorithms/hierarchy.js';
import { allreduceRunsThroughHubs } from '../../src/algorithms/hub_allreduce.js';
import { resolveOptions } from '../../src/algorithms/options.js';
import { reduceAlgorithm } from '../../src/algorithms/reduce_to_root.js';
import { reducescatterAlgorithm } from '../../src/algorithms/reducescatter.js';
import { RingReduce } from '../../src/api/runtime.js';
import { type AlgorithmsSetting, forcedAlgorithms } from '../../src/core/algorithm_names.js';
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { LocalEngine } from '../helpers/local_engine.js';
import { stopWorld } from '../helpers/world.js';

const kVar = 'RINGREDUCE_ALGORITHMS';

describe('the setting', () => {
  test('pairs from the variable, auto kept in the config and dropped for the choosers; the option replaces the variable', () => {
    const env = { [kVar]: ' broadcast=scatter_allgather , allreduce=rabenseifner,reduce=auto' };
    const config = resolveConfig({}, env);
    assert.deepEqual(config.algorithms, { broadcast: 'scatter_allgather', allreduce: 'rabenseifner', reduce: 'auto' });
    assert.ok(Object.isFrozen(config.algorithms));
    assert.deepEqual(forcedAlgorithms(config.algorithms), { broadcast: 'scatter_allgather', allreduce: 'rabenseifner' });
    assert.equal(forcedAlgorithms({ allgather: 'auto' }), undefined);
    assert.equal(resolveConfig({}, {}).algorithms, undefined);
    assert.equal(resolveConfig({}, { [kVar]: '' }).algorithms, undefined);
    assert.deepEqual(resolveConfig({ algorithms: { allgather: 'bruck' } }, env).algorithms, { allgather: 'bruck' });
  });

  test('a malformed variable is refused naming it and listing what is allowed', () => {
    const allowed =
      'allreduce: recursive_doubling, ring, rabenseifner, auto; allgather: ring, bruck, auto; ' +
      'broadcast: tree, chain, scatter_allgather, auto; reducescatter: ring, recursive_halving, auto; reduce: tree, rabenseifner, auto';
    const cases: [string, string][] = [
      ['alltoall=pairwise', 'no collective "alltoall"'],
      ['allreduce=bruck', 'allreduce has no algorithm "bruck"'],
      ['allreduce', '"allreduce" is not collective=algorithm'],
      ['allreduce=ring=tree', '"allreduce=ring=tree" is not collective=algorithm'],
      ['allreduce=ring,', '"" is not collective=algorithm'],
      ['allreduce=ring,allreduce=rabenseifner', 'allreduce is named twice'],
    ];
    for (const [value, why] of cases) {
      const expected = `${kVar}: ${why}; it takes collective=algorithm pairs separated by commas, such as broadcast=scatter_allgather,allreduce=rabenseifner, from ${allowed}; got ${JSON.stringify(value)}`;
      assert.throws(
        () => resolveConfig({}, { [kVar]: value }),
        (e: unknown) => e instanceof InvalidArgumentError && e.message === expected,
        value,
      );
    }
  });

  test('a malformed init option is refused naming it, the variable and what is allowed', () => {
    const refused = (algorithms: unknown, message: string) =>
      assert.throws(
        () => resolveConfig({ algorithms } as InitOptions, {}),
        (e: unknown) => e instanceof InvalidArgumentError && e.message === message,
        JSON.stringify(algorithms),
      );
    refused(
      { reduce: 'ring' },
      `init option 'algorithms.reduce': reduce has no algorithm "ring" (${kVar}): one of tree, rabenseifner, auto`,
    );
    refused(
      { gather: 'tree' },
      `init option 'algorithms': no collective "gather" (${kVar}): allreduce: recursive_doubling, ring, rabenseifner, auto; ` +
        'allgather: ring, bruck, auto; broadcast: tree, chain, scatter_allgather, auto; reducescatter: ring, recursive_halving, auto; ' +
        'reduce: tree, rabenseifner, auto',
    );
  });
});

describe('the choosers', () => {
  const forced = forcedAlgorithms({
    allreduce: 'rabenseifner',
    allgather: 'bruck',
    broadcast: 'scatter_allgather',
    reducescatter: 'recursive_halving',
    reduce: 'rabenseifner',
  });
  const options = resolveOptions({ algorithms: forced, latencyMaxBytes: 1 << 20 });

  test('a forced algorithm runs at every rank count and size, over latencyMaxBytes too', () => {
    for (const ranks of [2, 3, 4, 7, 8, 9, 64]) {
      for (const bytes of [0, 4, 4096, 1 << 20, 1 << 28]) {
        const blocks = new Array<number>(ranks).fill(Math.floor(bytes / ranks));
        assert.equal(allreduceAlgorithm(ranks, bytes, options), 'rabenseifner');
        assert.equal(allgatherAlgorithm(blocks, options), 'bruck');
        assert.equal(broadcastAlgorithm(ranks, bytes, options), 'scatter_allgather');
        assert.equal(reducescatterAlgorithm(blocks, options), 'recursive_halving');
        assert.equal(reduceAlgorithm(ranks, bytes, ranks - 1, options), 'rabenseifner');
      }
    }
    // Forcing one collective leaves the others to their choice: the ring below 8 ranks.
    const one = resolveOptions({ algorithms: { allreduce: 'ring' } });
    assert.equal(allreduceAlgorithm(4, 4, one), 'ring');
    assert.equal(allgatherAlgorithm([1 << 20, 1 << 20], one), 'ring');
    assert.equal(broadcastAlgorithm(4, 4, one), 'tree');
  });

  test("'auto' layouts give way to a forced allreduce or allgather; 'on' runs them, 'off' never", () => {
    // Only the sizes are read here.
    const hierarchy = { local: { size: 2 }, cross: { size: 2 } } as Hierarchy;
    const hubs = { size: 2 } as Parameters<typeof allreduceRunsThroughHubs>[1];
    const big = 1 << 24;
    assert.equal(allreduceRunsHierarchically('auto', hierarchy, big), true);
    assert.equal(allreduceRunsHierarchically('auto', hierarchy, big, { algorithms: { allreduce: 'ring' } }), false);
    assert.equal(allreduceRunsHierarchically('on', hierarchy, big, { algorithms: { allreduce: 'ring' } }), true);
    assert.equal(allreduceRunsHierarchically('off', hierarchy, big), false);
    assert.equal(allreduceRunsThroughHubs('auto', hubs, big), true);
    assert.equal(allreduceRunsThroughHubs('auto', hubs, big, { algorithms: { allreduce: 'rabenseifner' } }), false);
    assert.equal(allreduceRunsThroughHubs('on', hubs, big, { algorithms: { allreduce: 'rabenseifner' } }), true);
    assert.equal(allgatherRunsHierarchically('auto', hierarchy), true);
    assert.equal(allgatherRunsHierarchically('auto', hierarchy, { algorithms: { allgather: 'bruck' } }), false);
    assert.equal(allgatherRunsHierarchically('on', hierarchy, { algorithms: { allgather: 'bruck' } }), true);
    // A setting that forces another collective changes nothing here.
    assert.equal(allgatherRunsHierarchically('auto', hierarchy, { algorithms: { allreduce: 'ring' } }), true);
  });
});

/** Per rank, the bytes its collectives sent to each peer (data plane only: control messages are not sends). */
type Traffic = Map<number, number>[];

/** 4 ranks of real engines over the memory transport, with what each sends recorded. */
function recordedWorld(algorithms?: AlgorithmsSetting): { world: RingReduce[]; traffic: Traffic } {
  const size = 4;
  const traffic: Traffic = Array.from({ length: size }, () => new Map());
  const world = createMemoryWorld(size, { delivery: 'macrotask' }).map((transport, rank) => {
    const recording = new Proxy(transport, {
      get(target, key) {
        if (key === 'send') {
          return (peer: number, tag: number, data: Uint8Array) => {
            const sent = traffic[rank] as Map<number, number>;
            sent.set(peer, (sent.get(peer) ?? 0) + data.byteLength);
            return target.send(peer, tag, data);
          };
        }
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Transport;
    const options: InitOptions = { rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', fusionThresholdBytes: 0 };
    const config = resolveConfig(algorithms ? { ...options, algorithms } : options, {});
    return RingReduce.withEngine(config, new LocalEngine(config, recording));
  });
  return { world, traffic };
}

/** Runs `call` on every rank, then returns what each rank sent during it: its peers (sorted) and its bytes. */
async function sentDuring(
  recorded: { world: RingReduce[]; traffic: Traffic },
  call: (rr: RingReduce, rank: number) => Promise<unknown>,
): Promise<{ peers: number[]; bytes: number }[]> {
  for (const sent of recorded.traffic) sent.clear();
  await Promise.all(recorded.world.map((rr, rank) => call(rr, rank)));
  return recorded.traffic.map((sent) => ({
    peers: [...sent.keys()].sort((a, b) => a - b),
    bytes: [...sent.values()].reduce((a, b) => a + b, 0),
  }));
}

describe('on the wire: 4 ranks of engines over the memory transport', () => {
  const M = 4096;
  const calls = {
    allreduce: (rr: RingReduce) => rr.allreduce(new Float32Array(M / 4).fill(1), { name: 'ar' }),
    // Blocks of M/4 bytes.
    allgather: (rr: RingReduce) => rr.allgather(new Float32Array(M / 16).fill(1), { name: 'ag' }),
    broadcast: (rr: RingReduce) => rr.broadcast(new Float32Array(M / 4).fill(1), { name: 'bc', root: 0 }),
    reducescatter: (rr: RingReduce) => rr.reducescatter(new Float32Array(M / 4).fill(1), { name: 'rs' }),
    reduce: (rr: RingReduce) => rr.reduce(new Float32Array(M / 4).fill(1), { name: 'rd', root: 0 }),
    tiny: (rr: RingReduce) => rr.allreduce(new Float32Array([1]), { name: 'tiny' }),
  };

  test('the engine’s own choices below 8 ranks (for comparison)', async () => {
    const recorded = recordedWorld();
    try {
      // Recursive doubling: partners 1 and 2 of rank 0, M each.
      assert.deepEqual((await sentDuring(recorded, calls.allreduce))[0], { peers: [1, 2], bytes: 2 * M });
      // The rings: rank 0 sends to its right neighbour only.
      assert.deepEqual((await sentDuring(recorded, calls.allgather))[0]?.peers, [1]);
      assert.deepEqual((await sentDuring(recorded, calls.reducescatter))[0]?.peers, [1]);
      // Binomial trees: the last rank of a broadcast and the root of a reduce send nothing.
      assert.deepEqual((await sentDuring(recorded, calls.broadcast))[3], { peers: [], bytes: 0 });
      assert.deepEqual((await sentDuring(recorded, calls.reduce))[0], { peers: [], bytes: 0 });
      // A 4-byte allreduce, once its name is cached, rides with the negotiation (eager): no data-plane send at all.
      await sentDuring(recorded, calls.tiny);
      assert.ok((await sentDuring(recorded, calls.tiny)).every((s) => s.bytes === 0));
    } finally {
      await stopWorld(recorded.world);
    }
  });

  test('the forced algorithms, each with its own peers and bytes; a forced allreduce never goes eagerly', async () => {
    const recorded = recordedWorld({
      allreduce: 'rabenseifner',
      allgather: 'bruck',
      broadcast: 'scatter_allgather',
      reducescatter: 'recursive_halving',
      reduce: 'rabenseifner',
    });
    try {
      // Rabenseifner: halving with 2 then 1 (M/2, M/4), doubling back (M/4, M/2): 1.5M, not 2M.
      assert.deepEqual((await sentDuring(recorded, calls.allreduce))[0], { peers: [1, 2], bytes: 1.5 * M });
      // Bruck: rank 0 sends to 0 - 1 and 0 - 2, one block then two.
      assert.deepEqual((await sentDuring(recorded, calls.allgather))[0], { peers: [2, 3], bytes: (3 * M) / 4 });
      // Scatter, then recursive doubling relative to the root (allgather forced to Bruck's): the last rank sends too.
      assert.deepEqual((await sentDuring(recorded, calls.broadcast))[3], { peers: [1, 2], bytes: (3 * M) / 4 });
      // Recursive halving: partners 2 then 1, half then a quarter of the buffer.
      assert.deepEqual((await sentDuring(recorded, calls.reducescatter))[0], { peers: [1, 2], bytes: (3 * M) / 4 });
      // Rabenseifner's reduce: the root takes part in the halving.
      assert.deepEqual((await sentDuring(recorded, calls.reduce))[0], { peers: [1, 2], bytes: (3 * M) / 4 });
      for (const call of ['uncached', 'cached']) {
        const tiny = await sentDuring(recorded, calls.tiny);
        assert.ok(tiny.reduce((n, s) => n + s.bytes, 0) > 0, `${call}: ${JSON.stringify(tiny)}`);
      }
    } finally {
      await stopWorld(recorded.world);
    }
  });
});
