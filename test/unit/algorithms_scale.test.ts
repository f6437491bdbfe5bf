/**
 * The algorithms for many ranks (Bruck's allgather, recursive halving's reduce-scatter,
 * Rabenseifner's allreduce and reduce) over the memory transport, every rank a transport in this thread:
 * every dtype and op, lengths 0, 1, N ± 1 and more, even, uneven and empty blocks, 2 to 9 ranks
 * (powers of two and the fold), reordering and unbuffered deliveries with tiny segments; then
 * the choice: unchanged below 8 ranks for every size, by cost from 8 on, and run as chosen.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allgather, allgatherAlgorithm } from '../../src/algorithms/allgather.js';
import { allreduce, allreduceAlgorithm } from '../../src/algorithms/allreduce.js';
import { bruckAllgather } from '../../src/algorithms/bruck_allgather.js';
import { kCostChoiceMinRanks } from '../../src/algorithms/cost_model.js';
import { type AlgorithmOptions, resolveOptions } from '../../src/algorithms/options.js';
import { rabenseifnerAllreduce } from '../../src/algorithms/rabenseifner_allreduce.js';
import { rabenseifnerReduce } from '../../src/algorithms/rabenseifner_reduce.js';
import { recursiveHalvingReducescatter } from '../../src/algorithms/recursive_halving.js';
import { reduceAlgorithm, reduceToRoot } from '../../src/algorithms/reduce_to_root.js';
import { reducescatter, reducescatterAlgorithm } from '../../src/algorithms/reducescatter.js';
import { evenBlocks } from '../../src/algorithms/segments.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { constructorOf, isFloat, kDTypes } from '../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../src/core/types.js';
import { createMemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { garbage, onEveryRank } from './support/ranks.js';
import {
  firstMismatch,
  opsFor,
  type Random,
  randomArray,
  referenceReduce,
  sameBytes,
  seeded,
  toleranceFor,
} from './support/typed_data.js';

const kRanks = [2, 3, 4, 5, 6, 7, 8, 9];
/** Several segments per block at 1000 elements, so the matrix exercises each step's pipeline. */
const kMatrixOptions: AlgorithmOptions = { segmentBytes: 256, pipelineDepth: 3 };
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };
const kDeliveries: readonly MemoryWorldOptions[] = [
  { jitter: { seed: 7 } },
  { rendezvous: true },
  { rendezvous: true, jitter: { seed: 5 } },
];
const kTinySegments: readonly AlgorithmOptions[] = [
  { segmentBytes: 2, pipelineDepth: 1 },
  { segmentBytes: 8, pipelineDepth: 2 },
];
const lengthsFor = (n: number) => [...new Set([0, 1, n - 1, n + 1, 1000])];
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/** Even blocks of every total above, and uneven ones: empty ranks, one large block, a ramp. */
const countPatterns = (n: number): number[][] => [
  ...lengthsFor(n).map((total) => [...evenBlocks(total, n).lengths]),
  Array.from({ length: n }, (_, r) => (r % 3 === 1 ? 0 : 2 * r + 1)),
  Array.from({ length: n }, (_, r) => (r === n - 1 ? 300 : 1)),
  Array.from({ length: n }, (_, r) => (r === 0 ? 0 : r * 37)),
];

function inputsFor(dtype: DType, op: ReduceOp, n: number, length: number, random: Random): TypedArray[] {
  const forProduct = op === 'product' && isFloat(dtype);
  return Array.from({ length: n }, () => randomArray(dtype, length, random, forProduct));
}

function block(buf: TypedArray, counts: readonly number[], r: number): TypedArray {
  const offset = sum(counts.slice(0, r));
  return buf.subarray(offset, offset + (counts[r] as number));
}

/** Records the peers a rank sends to, to tell the algorithms apart. */
function peersSentTo(t: Transport): { transport: Transport; peers: Set<number> } {
  const peers = new Set<number>();
  const transport = Object.create(t) as Transport;
  transport.send = (peer, tag, data) => {
    peers.add(peer);
    return t.send(peer, tag, data);
  };
  return { transport, peers };
}

async function checkAllgather(
  world: readonly Transport[],
  dtype: DType,
  counts: number[],
  tag: number,
  options: AlgorithmOptions,
) {
  const blocks = counts.map((c, r) => randomArray(dtype, c, seeded(tag * 31 + r)));
  const expected = new (constructorOf(dtype))(sum(counts));
  const outs = world.map(() => garbage(dtype, sum(counts)));
  for (const [r, b] of blocks.entries()) {
    (expected as Float64Array).set(b as Float64Array, sum(counts.slice(0, r)));
    (outs[r] as Float64Array).set(b as Float64Array, sum(counts.slice(0, r)));
  }
  await onEveryRank(world, (t, r) => bruckAllgather(t, outs[r] as TypedArray, counts, tag, options));
  for (const [r, out] of outs.entries()) assert.ok(sameBytes(out, expected), `N=${world.length} ${dtype} [${counts}] rank ${r}`);
}

/** Reduce-scatters in place and into `out`; checks each rank's block against the serial reference, and the two alike. */
async function checkReducescatter(
  world: readonly Transport[],
  dtype: DType,
  counts: number[],
  ops: readonly ReduceOp[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
) {
  const n = world.length;
  for (const op of ops) {
    const inputs = inputsFor(dtype, op, n, sum(counts), random);
    const inPlace = inputs.map((a) => a.slice());
    const bufs = inputs.map((a) => a.slice());
    const outs = counts.map((c) => garbage(dtype, c));
    await onEveryRank(world, (t, r) => recursiveHalvingReducescatter(t, inPlace[r] as TypedArray, counts, op, tag, options(r)));
    await onEveryRank(world, (t, r) =>
      recursiveHalvingReducescatter(t, bufs[r] as TypedArray, counts, op, tag, options(r), outs[r] as TypedArray),
    );
    const expected = referenceReduce(dtype, op, inputs);
    const tolerance = toleranceFor(dtype, op, n);
    for (const [r, out] of outs.entries()) {
      const where = `N=${n} ${dtype} ${op} [${counts}] rank ${r}`;
      assert.equal(firstMismatch(out, block(expected, counts, r), tolerance), undefined, where);
      assert.ok(sameBytes(out, block(inPlace[r] as TypedArray, counts, r)), `${where}: into out differs from in place`);
    }
  }
}

async function checkAllreduce(
  world: readonly Transport[],
  dtype: DType,
  length: number,
  ops: readonly ReduceOp[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
) {
  const n = world.length;
  for (const op of ops) {
    const inputs = inputsFor(dtype, op, n, length, random);
    const bufs = inputs.map((a) => a.slice());
    await onEveryRank(world, (t, r) => rabenseifnerAllreduce(t, bufs[r] as TypedArray, op, tag, options(r)));
    const expected = referenceReduce(dtype, op, inputs);
    const where = `N=${n} ${dtype} ${op} length ${length}`;
    assert.equal(firstMismatch(bufs[0] as TypedArray, expected, toleranceFor(dtype, op, n)), undefined, where);
    // Every block is reduced once and copied: every rank holds the same bits, floats included.
    for (const [r, buf] of bufs.entries()) assert.ok(sameBytes(buf, bufs[0] as TypedArray), `${where}: rank ${r} differs`);
  }
}

describe("Bruck's allgather", () => {
  it('N = 2..9: every dtype, even, uneven and empty blocks land on every rank', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) await checkAllgather(world, dtype, counts, tag++, kMatrixOptions);
      }
      await world.closeAll();
    }
  });

  it('keeps its steps apart under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          for (const counts of [[...evenBlocks(n + 1, n).lengths], countPatterns(n)[5] as number[]]) {
            await checkAllgather(world, 'int16', counts, tag++, options);
          }
        }
        await world.closeAll();
      }
    }
  });

  it('sends to ranks r - 1, r - 2, r - 4 only: ⌈log2 N⌉ steps', async () => {
    const n = 9;
    const world = createMemoryWorld(n, kFast).map(peersSentTo);
    const counts = evenBlocks(90, n).lengths;
    const outs = world.map(() => new Float32Array(90));
    await onEveryRank(
      world.map((w) => w.transport),
      (t, r) => bruckAllgather(t, outs[r] as TypedArray, counts, 0),
    );
    for (const [r, { peers }] of world.entries())
      assert.deepEqual([...peers].sort(), [1, 2, 4, 8].map((d) => (r - d + n) % n).sort());
  });
});

describe('recursive halving reduce-scatter', () => {
  it('N = 2..9: every dtype and op, even, uneven and empty blocks, in place and into out', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 11);
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          // The large totals take one op each, in turn, to keep the matrix quick.
          const all = opsFor(dtype);
          const ops = sum(counts) >= 300 ? [all[tag % all.length] as ReduceOp] : all;
          await checkReducescatter(world, dtype, counts, ops, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
        }
      }
      await world.closeAll();
    }
  });

  it('keeps its steps and the fold apart under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [3, 6, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          for (const counts of [[...evenBlocks(n + 1, n).lengths], countPatterns(n)[5] as number[]]) {
            await checkReducescatter(world, 'float64', counts, ['average'], tag++, () => options, seeded(tag));
          }
        }
        await world.closeAll();
      }
    }
  });
});

describe("Rabenseifner's allreduce", () => {
  it('N = 2..9: every dtype and op, lengths 0, 1, N ± 1 and 1000, the same bits on every rank', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 13);
      for (const dtype of kDTypes) {
        for (const length of lengthsFor(n)) {
          await checkAllreduce(
            world,
            dtype,
            length,
            opsFor(dtype),
            tag++,
            (r) => ({ ...kMatrixOptions, pool: pools[r] }),
            random,
          );
        }
      }
      await world.closeAll();
    }
  });

  it('keeps its phases and the fold apart under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [3, 7, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          await checkAllreduce(world, 'float32', 4 * n + 3, ['sum', 'average'], tag++, () => options, seeded(tag));
        }
        await world.closeAll();
      }
    }
  });
});

async function checkReduce(
  world: readonly Transport[],
  dtype: DType,
  length: number,
  root: number,
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
) {
  const n = world.length;
  for (const op of opsFor(dtype)) {
    const inputs = inputsFor(dtype, op, n, length, random);
    const bufs = inputs.map((a) => a.slice());
    await onEveryRank(world, (t, r) => rabenseifnerReduce(t, bufs[r] as TypedArray, op, root, tag, options(r)));
    const expected = referenceReduce(dtype, op, inputs);
    const where = `N=${n} ${dtype} ${op} length ${length} root ${root}`;
    assert.equal(firstMismatch(bufs[root] as TypedArray, expected, toleranceFor(dtype, op, n)), undefined, where);
  }
}

describe("Rabenseifner's reduce", () => {
  it('N = 2..9: every dtype and op, lengths 0, 1, N ± 1 and 1000, roots that fold, gather and sit in between', async () => {
    let tag = 0;
    for (const n of kRanks) {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 17);
      for (const dtype of kDTypes) {
        for (const length of lengthsFor(n)) {
          // Root 0 is the even rank of a pair when N is not a power of two; rank 1 its partner.
          const root = [0, 1, n - 1, n >> 1][tag % 4] as number;
          await checkReduce(world, dtype, length, root, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
        }
      }
      await world.closeAll();
    }
  });

  it('every root, under reordering and unbuffered deliveries, with tiny segments', async () => {
    let tag = 0;
    for (const n of [6, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (let root = 0; root < n; root++) {
          const options = kTinySegments[root % 2] as AlgorithmOptions;
          await checkReduce(world, 'int32', 2 * n + 1, root, tag++, () => options, seeded(tag));
        }
        await world.closeAll();
      }
    }
  });
});

describe('the choice', () => {
  /** The engine's options: RINGREDUCE_SEGMENT_BYTES' default, no cost model, no threshold. */
  const engine = resolveOptions({ segmentBytes: 4 << 20 });
  const sizes = [0, 1, 4, 1 << 10, (64 << 10) - 4, 64 << 10, (64 << 10) + 4, 1 << 20, 16 << 20, 256 << 20, 1 << 30];

  it('below 8 ranks, for every size: recursive doubling up to 64 KiB, else the ring (Rabenseifner to 2 MiB on 4 ranks of one host); the tree for reduce', () => {
    const oneHost = resolveOptions({ segmentBytes: 4 << 20, oneHost: true });
    for (let n = 2; n < kCostChoiceMinRanks; n++) {
      for (const bytes of sizes) {
        const blocks = evenBlocks(bytes, n).lengths;
        const small = bytes <= 64 << 10;
        assert.equal(allreduceAlgorithm(n, bytes, engine), small ? 'recursive_doubling' : 'ring', `${n} ranks, ${bytes} B`);
        const mid = n === 4 && bytes <= 2 << 20 ? 'rabenseifner' : 'ring';
        assert.equal(
          allreduceAlgorithm(n, bytes, oneHost),
          small ? 'recursive_doubling' : mid,
          `${n} ranks of one host, ${bytes} B`,
        );
        assert.equal(allgatherAlgorithm(blocks, engine), 'ring', `allgather, ${n} ranks, ${bytes} B`);
        assert.equal(reducescatterAlgorithm(blocks, engine), 'ring', `reducescatter, ${n} ranks, ${bytes} B`);
        for (let root = 0; root < n; root++) assert.equal(reduceAlgorithm(n, bytes, root, engine), 'tree');
      }
    }
  });

  it('from 8 ranks by cost: the logarithmic algorithms for small messages and many ranks, the ring where it is cheaper', () => {
    const even = (n: number, bytes: number) => evenBlocks(bytes, n).lengths;
    assert.equal(allgatherAlgorithm(even(64, 4 * 64), engine), 'bruck');
    assert.equal(allgatherAlgorithm(even(1024, 16 << 20), engine), 'bruck');
    assert.equal(allgatherAlgorithm(even(8, 1 << 30), engine), 'ring');
    // One rank with all the data: Bruck would carry it at every step.
    assert.equal(allgatherAlgorithm([1 << 30, ...new Array<number>(63).fill(0)], engine), 'ring');
    assert.equal(reducescatterAlgorithm(even(64, 4 * 64), engine), 'recursive_halving');
    assert.equal(reducescatterAlgorithm(even(1024, 16 << 20), engine), 'recursive_halving');
    assert.equal(allreduceAlgorithm(1024, 4, engine), 'recursive_doubling');
    assert.equal(allreduceAlgorithm(1024, 16 << 20, engine), 'rabenseifner');
    assert.equal(allreduceAlgorithm(64, 16 << 20, engine), 'rabenseifner');
    // 1 GiB on 64 ranks: blocks of several segments, where the ring's stream hides its steps.
    assert.equal(allreduceAlgorithm(64, 1 << 30, engine), 'ring');
    assert.equal(reduceAlgorithm(64, 4, 0, engine), 'tree');
    assert.equal(reduceAlgorithm(1024, 16 << 20, 0, engine), 'rabenseifner');
    assert.equal(reduceAlgorithm(64, 1 << 30, 5, engine), 'rabenseifner');
    // A given latencyMaxBytes still decides alone.
    assert.equal(allreduceAlgorithm(1024, 16 << 20, resolveOptions({ latencyMaxBytes: 1024 })), 'ring');
  });

  it('allgather, reducescatter and allreduce run what they choose, with the results of the ring', async () => {
    const n = 8;
    const world = createMemoryWorld(n, kFast).map(peersSentTo);
    const transports = world.map((w) => w.transport);
    const counts = [...evenBlocks(8 * n, n).lengths];
    const outs = world.map((_, r) => {
      const out = new Int32Array(8 * n);
      out.fill(r + 1, 8 * r, 8 * r + 8);
      return out;
    });
    await onEveryRank(transports, (t, r) => allgather(t, outs[r] as TypedArray, counts, 0));
    const gathered = Int32Array.from({ length: 8 * n }, (_, i) => Math.floor(i / 8) + 1);
    for (const out of outs) assert.ok(sameBytes(out, gathered));
    // Bruck: ranks r - 1, r - 2 and r - 4; a ring would send to r + 1 only.
    assert.deepEqual([...(world[0] as { peers: Set<number> }).peers].sort(), [4, 6, 7]);
    for (const w of world) w.peers.clear();
    const bufs = world.map(() => new Float64Array(8 * n).fill(1));
    const mine = world.map(() => new Float64Array(8));
    await onEveryRank(transports, (t, r) => reducescatter(t, bufs[r] as TypedArray, counts, 'sum', 1, {}, mine[r]));
    for (const m of mine) assert.deepEqual([...m], new Array(8).fill(n));
    // Recursive halving: partners r XOR 4, 2, 1.
    assert.deepEqual([...(world[0] as { peers: Set<number> }).peers].sort(), [1, 2, 4]);
    const sums = world.map(() => new Float32Array(1 << 16).fill(0.5));
    await onEveryRank(transports, (t, r) => allreduce(t, sums[r] as TypedArray, 'average', 2, { segmentBytes: 4 << 20 }));
    assert.equal(allreduceAlgorithm(n, 1 << 18, resolveOptions({ segmentBytes: 4 << 20 })), 'rabenseifner');
    for (const s of sums) assert.ok(s.every((x) => x === 0.5));
    const reduced = world.map(() => new Float64Array(1 << 16).fill(2));
    assert.equal(reduceAlgorithm(n, 1 << 19, 3, resolveOptions({ segmentBytes: 4 << 20 })), 'rabenseifner');
    await onEveryRank(transports, (t, r) => reduceToRoot(t, reduced[r] as TypedArray, 'sum', 3, 3, { segmentBytes: 4 << 20 }));
    assert.ok((reduced[3] as Float64Array).every((x) => x === 2 * n));
  });
});
