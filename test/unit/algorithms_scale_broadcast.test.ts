/**
 * The scatter that serves its farthest subtree first and the broadcast by scatter + allgather
 * (recursive doubling relative to the root for N a power of two, the chosen allgather otherwise)
 * over the memory transport, every rank a transport in this thread: 5, 8 and 16 ranks, every
 * dtype, lengths 0, 1, N ± 1 and more, uneven and empty blocks, roots that fold into the middle
 * and the end of rank order, several segments per step; reordering and unbuffered deliveries with
 * tiny segments; and the job's cost model, which moves the choices from 8 ranks on only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allreduceAlgorithm } from '../../src/algorithms/allreduce.js';
import { broadcastAlgorithm } from '../../src/algorithms/broadcast.js';
import { kCostChoiceMinRanks } from '../../src/algorithms/cost_model.js';
import { type AlgorithmOptions, resolveOptions } from '../../src/algorithms/options.js';
import { scatterAllgatherBroadcast } from '../../src/algorithms/scatter_allgather_broadcast.js';
import { evenBlocks } from '../../src/algorithms/segments.js';
import { treeScatter } from '../../src/algorithms/tree_scatter.js';
import { kDTypes } from '../../src/core/dtypes.js';
import type { DType, TypedArray } from '../../src/core/types.js';
import { createMemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';
import { bytesOf, type Transport } from '../../src/transport/transport.js';
import { garbage, onEveryRank } from './support/ranks.js';
import { randomArray, sameBytes, seeded } from './support/typed_data.js';

const kRanks = [5, 8, 16];
/** A few elements per segment, so that subtrees and doubling steps stream several segments. */
const kMatrixOptions: AlgorithmOptions = { segmentBytes: 24, pipelineDepth: 3 };
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };
const kDeliveries: readonly MemoryWorldOptions[] = [{ jitter: { seed: 3 } }, { rendezvous: true, jitter: { seed: 9 } }];
const kTinySegments: readonly AlgorithmOptions[] = [
  { segmentBytes: 1, pipelineDepth: 1 },
  { segmentBytes: 8, pipelineDepth: 2 },
];
const lengthsFor = (n: number) => [...new Set([0, 1, n - 1, n + 1, 97])];
const rootsFor = (n: number) => [...new Set([0, 1, n >> 1, n - 1])];
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/** Even blocks of every total above, and uneven ones: empty ranks, one large block. */
const countPatterns = (n: number): number[][] => [
  ...lengthsFor(n).map((total) => [...evenBlocks(total, n).lengths]),
  Array.from({ length: n }, (_, r) => (r % 3 === 1 ? 0 : 2 * r + 1)),
  Array.from({ length: n }, (_, r) => (r === n - 1 ? 40 : 1)),
];

async function checkScatter(
  world: readonly Transport[],
  dtype: DType,
  counts: number[],
  root: number,
  tag: number,
  options: AlgorithmOptions,
) {
  const input = randomArray(dtype, sum(counts), seeded(tag));
  const outs = counts.map((c) => garbage(dtype, c));
  await onEveryRank(world, (t, r) =>
    treeScatter(t, r === root ? input.slice() : undefined, outs[r] as TypedArray, counts, root, tag, options),
  );
  for (const [r, out] of outs.entries()) {
    const offset = sum(counts.slice(0, r));
    const expected = input.subarray(offset, offset + (counts[r] as number));
    assert.ok(sameBytes(out, expected), `N=${world.length} ${dtype} [${counts}] root ${root} rank ${r}`);
  }
}

async function checkBroadcast(
  world: readonly Transport[],
  dtype: DType,
  length: number,
  root: number,
  tag: number,
  options: AlgorithmOptions,
) {
  const source = randomArray(dtype, length, seeded(tag));
  const bufs = world.map((_, r) => (r === root ? source.slice() : garbage(dtype, length)));
  await onEveryRank(world, (t, r) => scatterAllgatherBroadcast(t, bytesOf(bufs[r] as TypedArray), root, tag, options));
  for (const [r, buf] of bufs.entries()) {
    assert.ok(sameBytes(buf, source), `N=${world.length} ${dtype} length ${length} root ${root} rank ${r}`);
  }
}

describe('scatter, farthest subtree first', () => {
  it('N = 5, 8, 16: every dtype, even, uneven and empty blocks, roots at the start, middle and end', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          const roots = rootsFor(n);
          await checkScatter(world, dtype, counts, roots[tag % roots.length] as number, tag++, kMatrixOptions);
        }
      }
      await world.closeAll();
    }
  });

  it('every root, under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (let root = 0; root < n; root++) {
          const counts = [...evenBlocks(3 * n + 1, n).lengths];
          await checkScatter(world, 'int16', counts, root, tag++, kTinySegments[root % 2] as AlgorithmOptions);
        }
        await world.closeAll();
      }
    }
  });
});

describe('broadcast by scatter + allgather', () => {
  it('N = 5, 8, 16: every dtype, lengths 0, 1, N ± 1 and 97 elements, roots at the start, middle and end', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      for (const dtype of kDTypes) {
        for (const length of lengthsFor(n)) {
          const roots = rootsFor(n);
          await checkBroadcast(world, dtype, length, roots[tag % roots.length] as number, tag++, kMatrixOptions);
        }
      }
      await world.closeAll();
    }
  });

  it('every root, under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (let root = 0; root < n; root++) {
          await checkBroadcast(world, 'float32', 2 * n + 1, root, tag++, kTinySegments[root % 2] as AlgorithmOptions);
        }
        await world.closeAll();
      }
    }
  });

  it('from 8 ranks takes the cheapest of tree, scatter + allgather and chain; below, the tree up to a segment, then the chain', () => {
    const engine = resolveOptions({ segmentBytes: 4 << 20 });
    for (let n = 2; n < kCostChoiceMinRanks; n++) {
      assert.equal(broadcastAlgorithm(n, 4 << 20, engine), 'tree');
      assert.equal(broadcastAlgorithm(n, (4 << 20) + 1, engine), 'chain');
    }
    assert.equal(broadcastAlgorithm(64, 1 << 10, engine), 'tree');
    assert.equal(broadcastAlgorithm(64, 1 << 20, engine), 'scatter_allgather');
    assert.equal(broadcastAlgorithm(1024, 16 << 20, engine), 'scatter_allgather');
    // 1 GiB on 64 ranks: 256 segments, the chain's fill of 62 segments is small beside them.
    assert.equal(broadcastAlgorithm(64, 1 << 30, engine), 'chain');
  });
});

describe("the job's cost model (jobCostModel)", () => {
  it('moves the choices from 8 ranks on and leaves those below as they are', () => {
    // A slow message and a fast wire: fewer, larger messages win.
    const slowMessages = resolveOptions({ segmentBytes: 4 << 20, jobCostModel: { alpha: 1e-3, beta: 1e-12 } });
    const engine = resolveOptions({ segmentBytes: 4 << 20 });
    assert.equal(broadcastAlgorithm(64, 1 << 20, engine), 'scatter_allgather');
    assert.equal(broadcastAlgorithm(64, 1 << 20, slowMessages), 'tree');
    assert.equal(allreduceAlgorithm(64, 1 << 20, engine), 'rabenseifner');
    assert.equal(allreduceAlgorithm(64, 1 << 20, slowMessages), 'recursive_doubling');
    for (let n = 2; n < kCostChoiceMinRanks; n++) {
      for (const bytes of [4, 64 << 10, (64 << 10) + 4, 16 << 20]) {
        assert.equal(allreduceAlgorithm(n, bytes, slowMessages), allreduceAlgorithm(n, bytes, engine), `${n} ranks ${bytes} B`);
        assert.equal(broadcastAlgorithm(n, bytes, slowMessages), broadcastAlgorithm(n, bytes, engine), `${n} ranks ${bytes} B`);
      }
    }
    // costModel, unlike it, decides below 8 ranks too.
    const fastMessages = { alpha: 1e-9, beta: 1e-9 };
    assert.equal(allreduceAlgorithm(4, 32 << 10, resolveOptions({ jobCostModel: fastMessages })), 'recursive_doubling');
    assert.equal(allreduceAlgorithm(4, 32 << 10, resolveOptions({ costModel: fastMessages })), 'ring');
  });
});
