import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { alltoall } from '../../src/algorithms/alltoall.js';
import type { AlgorithmOptions } from '../../src/algorithms/options.js';
import { createWasmKernels } from '../../src/algorithms/reduce_wasm.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { ringReducescatter } from '../../src/algorithms/ring_reducescatter.js';
import { chunkLength, evenBlocks } from '../../src/algorithms/segments.js';
import { treeGather } from '../../src/algorithms/tree_gather.js';
import { treeReduce } from '../../src/algorithms/tree_reduce.js';
import { treeScatter } from '../../src/algorithms/tree_scatter.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { constructorOf, isFloat, kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
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

const kSizes = [1, 2, 3, 4, 5, 8];
const kLarge = 2 ** 16;
/** Total element counts; the large one is cut into many segments by kMatrixOptions. */
const countsFor = (n: number) => [...new Set([0, 1, n - 1, n, n + 1, 1000, kLarge])];
const kMatrixOptions: AlgorithmOptions = { segmentBytes: 16 * 1024, pipelineDepth: 3 };
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };
/** Slow and unbuffered deliveries, each with tiny segments at several pipeline depths. */
const kDeliveries: readonly MemoryWorldOptions[] = [
  { delivery: 'macrotask' },
  { jitter: { seed: 7 } },
  { rendezvous: true },
  { rendezvous: true, jitter: { seed: 5 } },
];
const kTinySegments: readonly AlgorithmOptions[] = [
  { segmentBytes: 1, pipelineDepth: 1 },
  { segmentBytes: 8, pipelineDepth: 2 },
  { segmentBytes: 24, pipelineDepth: 5 },
];

/** Runs one call per rank and waits for all of them, so no failure leaves a rank running. */
function concat(dtype: DType, parts: readonly TypedArray[]): TypedArray {
  const out = new (constructorOf(dtype))(parts.reduce((a, p) => a + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    (out as Float64Array).set(part as Float64Array, offset);
    offset += part.length;
  }
  return out;
}

function offsetsOf(counts: readonly number[]): number[] {
  const offsets = [0];
  for (const count of counts) offsets.push((offsets.at(-1) as number) + count);
  return offsets;
}

function sum(counts: readonly number[]): number {
  return counts.reduce((a, b) => a + b, 0);
}

function block(array: TypedArray, counts: readonly number[], r: number): TypedArray {
  const start = offsetsOf(counts)[r] as number;
  return array.subarray(start, start + (counts[r] as number));
}

/** Even, uneven and mostly empty per-rank counts for an n-rank world. */
function countPatterns(n: number): number[][] {
  const cycle = (values: readonly number[]) => Array.from({ length: n }, (_, r) => values[r % values.length] as number);
  return [
    ...countsFor(n).map((total) => evenBlocks(total, n).lengths as number[]),
    cycle([0, 3, 0, 7, 1]),
    cycle([1000, 1, 0, 4099, 5]),
    Array.from({ length: n }, (_, r) => (r === n - 1 ? 17 : 0)),
    Array.from({ length: n }, (_, r) => (r === 0 ? 0 : r * 101)),
  ];
}

/** Records what a rank sends and how much it has in flight, to check the algorithms' traffic. */
class CountingTransport implements Transport {
  bytesSent = 0;
  messages = 0;
  largestMessage = 0;
  readonly peersSentTo = new Set<number>();
  private sending = 0;
  private receiving = 0;
  maxSending = 0;
  maxReceiving = 0;
  constructor(private readonly inner: Transport) {}
  get rank() {
    return this.inner.rank;
  }
  get size() {
    return this.inner.size;
  }
  send(peer: number, tag: number, data: Uint8Array) {
    this.bytesSent += data.byteLength;
    this.messages++;
    this.largestMessage = Math.max(this.largestMessage, data.byteLength);
    this.peersSentTo.add(peer);
    this.maxSending = Math.max(this.maxSending, ++this.sending);
    return this.inner.send(peer, tag, data).finally(() => this.sending--);
  }
  recv(peer: number, tag: number, into: Uint8Array) {
    this.maxReceiving = Math.max(this.maxReceiving, ++this.receiving);
    return this.inner.recv(peer, tag, into).finally(() => this.receiving--);
  }
  sendControl(peer: number, payload: Uint8Array) {
    return this.inner.sendControl(peer, payload);
  }
  onControl(handler: Parameters<Transport['onControl']>[0]) {
    this.inner.onControl(handler);
  }
  onPeerFailure(handler: Parameters<Transport['onPeerFailure']>[0]) {
    this.inner.onPeerFailure(handler);
  }
  close() {
    return this.inner.close();
  }
}

function counting(n: number, options: MemoryWorldOptions = kFast): CountingTransport[] {
  return createMemoryWorld(n, options).map((t) => new CountingTransport(t));
}

async function closeAll(world: readonly Transport[]): Promise<void> {
  await Promise.all(world.map((t) => t.close()));
}

/** Inputs for `op`: floats near 1 for products, so that they neither vanish nor overflow. */
function inputsFor(dtype: DType, op: ReduceOp, n: number, length: number, random: Random): TypedArray[] {
  const forProduct = op === 'product' && isFloat(dtype);
  return Array.from({ length: n }, () => randomArray(dtype, length, random, forProduct));
}

/** Reduce-scatters fresh inputs with every op and checks each rank's block against the serial reference. */
async function checkReducescatter(
  world: readonly Transport[],
  dtype: DType,
  counts: readonly number[],
  ops: readonly ReduceOp[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const n = world.length;
  for (const op of ops) {
    const inputs = inputsFor(dtype, op, n, sum(counts), random);
    const bufs = inputs.map((a) => a.slice());
    await onEveryRank(world, (t, r) => ringReducescatter(t, bufs[r] as TypedArray, counts, op, tag, options(r)));
    const expected = referenceReduce(dtype, op, inputs);
    const tolerance = toleranceFor(dtype, op, n);
    for (const [r, buf] of bufs.entries()) {
      const where = `N=${n} ${dtype} ${op} [${counts}] rank ${r}`;
      assert.equal(firstMismatch(block(buf, counts, r), block(expected, counts, r), tolerance), undefined, where);
    }
  }
}

/**
 * Reduce-scatters the same inputs twice, in place and into `out` (garbage beforehand, so a
 * region never written shows), and checks that every rank's `out` equals the serial reference
 * and has the bits of the in-place result. `buf` is work space with `out`: nothing about it is
 * checked.
 */
async function checkReducescatterInto(
  world: readonly Transport[],
  dtype: DType,
  counts: readonly number[],
  ops: readonly ReduceOp[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const n = world.length;
  for (const op of ops) {
    const inputs = inputsFor(dtype, op, n, sum(counts), random);
    const inPlace = inputs.map((a) => a.slice());
    const bufs = inputs.map((a) => a.slice());
    const outs = counts.map((c) => garbage(dtype, c));
    await onEveryRank(world, (t, r) => ringReducescatter(t, inPlace[r] as TypedArray, counts, op, tag, options(r)));
    await onEveryRank(world, (t, r) =>
      ringReducescatter(t, bufs[r] as TypedArray, counts, op, tag, options(r), outs[r] as TypedArray),
    );
    const expected = referenceReduce(dtype, op, inputs);
    const tolerance = toleranceFor(dtype, op, n);
    for (const [r, out] of outs.entries()) {
      const where = `N=${n} ${dtype} ${op} [${counts}] rank ${r} into out`;
      assert.equal(firstMismatch(out, block(expected, counts, r), tolerance), undefined, where);
      assert.ok(sameBytes(out, block(inPlace[r] as TypedArray, counts, r)), `${where}: bits differ from in place`);
    }
  }
}

/** Reduces fresh inputs to `root` with every op; returns the root's results, by op. */
async function checkReduce(
  world: readonly Transport[],
  dtype: DType,
  count: number,
  root: number,
  ops: readonly ReduceOp[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const n = world.length;
  for (const op of ops) {
    const inputs = inputsFor(dtype, op, n, count, random);
    const bufs = inputs.map((a) => a.slice());
    await onEveryRank(world, (t, r) => treeReduce(t, bufs[r] as TypedArray, op, root, tag, options(r)));
    const expected = referenceReduce(dtype, op, inputs);
    const where = `N=${n} ${dtype} ${op} count=${count} root=${root}`;
    assert.equal(firstMismatch(bufs[root] as TypedArray, expected, toleranceFor(dtype, op, n)), undefined, where);
  }
}

async function checkGather(
  world: readonly Transport[],
  dtype: DType,
  counts: readonly number[],
  root: number,
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const blocks = counts.map((c) => randomArray(dtype, c, random));
  const inputs = blocks.map((b) => b.slice());
  const outs = world.map((_, r) => (r === root ? garbage(dtype, sum(counts)) : undefined));
  await onEveryRank(world, (t, r) => treeGather(t, inputs[r] as TypedArray, outs[r], counts, root, tag, options(r)));
  const where = `N=${world.length} ${dtype} [${counts}] root=${root}`;
  assert.ok(sameBytes(outs[root] as TypedArray, concat(dtype, blocks)), where);
  for (const [r, input] of inputs.entries())
    assert.ok(sameBytes(input, blocks[r] as TypedArray), `${where}: rank ${r}'s input changed`);
}

async function checkScatter(
  world: readonly Transport[],
  dtype: DType,
  counts: readonly number[],
  root: number,
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const source = randomArray(dtype, sum(counts), random);
  const input = source.slice();
  const outputs = counts.map((c) => garbage(dtype, c));
  await onEveryRank(world, (t, r) =>
    treeScatter(t, r === root ? input : undefined, outputs[r] as TypedArray, counts, root, tag, options(r)),
  );
  const where = `N=${world.length} ${dtype} [${counts}] root=${root}`;
  for (const [r, output] of outputs.entries()) assert.ok(sameBytes(output, block(source, counts, r)), `${where} rank ${r}`);
  assert.ok(sameBytes(input, source), `${where}: the root's input changed`);
}

/** matrix[i][j]: the elements rank i sends to rank j. */
async function checkAlltoall(
  world: readonly Transport[],
  dtype: DType,
  matrix: readonly (readonly number[])[],
  tag: number,
  options: AlgorithmOptions,
  random: Random,
): Promise<void> {
  const n = world.length;
  const recvCounts = (r: number) => matrix.map((row) => row[r] as number);
  const inputs = matrix.map((row) => randomArray(dtype, sum(row), random));
  const copies = inputs.map((a) => a.slice());
  const outputs = world.map((_, r) => garbage(dtype, sum(recvCounts(r))));
  await onEveryRank(world, (t, r) =>
    alltoall(t, copies[r] as TypedArray, matrix[r] as number[], outputs[r] as TypedArray, recvCounts(r), tag, options),
  );
  for (const [r, output] of outputs.entries()) {
    const expected = concat(
      dtype,
      inputs.map((input, j) => block(input, matrix[j] as number[], r)),
    );
    assert.ok(sameBytes(output, expected), `N=${n} ${dtype} [${matrix.map((row) => `[${row}]`)}] rank ${r}`);
  }
  for (const [r, copy] of copies.entries()) assert.ok(sameBytes(copy, inputs[r] as TypedArray), `rank ${r}'s input changed`);
}

/** Uniform, uneven, and empty rows and columns. */
function matrixPatterns(n: number, random: Random): number[][][] {
  const square = (entry: (i: number, j: number) => number) =>
    Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => entry(i, j)));
  return [
    // Rank i sends `total` elements in all, cut unevenly across its peers.
    ...countsFor(n).map((total) => square((i, j) => chunkLength(total, n, (i + j) % n))),
    square(() => (random() % 3 === 0 ? 0 : random() % 60)),
    square((i, j) => (i === 0 ? 0 : i + j + 1)), // rank 0 sends nothing
    square((i, j) => (j === n - 1 ? 0 : 50 * (i + 1))), // the last rank receives nothing
    square((i, j) => (i === j ? 9 : 0)), // only the local copies
  ];
}

async function rejectsNaming(promise: Promise<unknown>, name: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof InvalidArgumentError, `${error}`);
    assert.ok(error.message.includes(name), `"${error.message}" does not name ${name}`);
    return true;
  });
}

describe('ringReducescatter', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, op, even and uneven counts equals the serial reduction of each rank's block`, async () => {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 7);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          // The large buffer takes the ops two at a time across dtypes, to keep the matrix quick.
          const all = opsFor(dtype);
          const ops = sum(counts) === kLarge ? all.filter((_, i) => (i + tag) % 2 === 0) : all;
          await checkReducescatter(world, dtype, counts, ops, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          const random = seeded(round);
          for (const counts of [evenBlocks(n + 1, n).lengths, countPatterns(n)[7] as number[]]) {
            await checkReducescatter(world, dtype, counts, ['sum', 'max'], round, () => options, random);
          }
        }
        await world.closeAll();
      }
    }
  });

  it('sends half of what an allreduce of the same buffer sends: every block but its own, once', async () => {
    const n = 4;
    const count = 1001;
    const counts = evenBlocks(count, n).lengths;
    const options = { segmentBytes: 800 };
    const scatterWorld = counting(n);
    const bufs = scatterWorld.map(() => new Float64Array(count).fill(1));
    await onEveryRank(scatterWorld, (t, r) => ringReducescatter(t, bufs[r] as TypedArray, counts, 'sum', 0, options));
    const allreduceWorld = counting(n);
    const full = allreduceWorld.map(() => new Float64Array(count).fill(1));
    await onEveryRank(allreduceWorld, (t, r) => ringAllreduce(t, full[r] as TypedArray, 'sum', 0, options));
    for (const t of scatterWorld) {
      const r = t.rank;
      assert.equal(t.bytesSent, (count - (counts[r] as number)) * 8, `rank ${r}`);
      assert.deepEqual([...t.peersSentTo], [(r + 1) % n]);
      assert.ok(block(bufs[r] as TypedArray, counts, r).every((v) => v === n));
      const ratio = (allreduceWorld[r] as CountingTransport).bytesSent / t.bytesSent;
      assert.ok(Math.abs(ratio - 2) < 0.01, `rank ${r}: allreduce/reducescatter = ${ratio}`);
    }
    await closeAll([...scatterWorld, ...allreduceWorld]);
  });

  it('refuses bad counts and ops, naming the argument', async () => {
    const [a] = createMemoryWorld(2, kFast);
    const t = a as Transport;
    await rejectsNaming(ringReducescatter(t, new Int8Array(3), [3], 'sum', 0), 'counts');
    await rejectsNaming(ringReducescatter(t, new Int8Array(3), [1, 1, 1], 'sum', 0), 'counts');
    await rejectsNaming(ringReducescatter(t, new Int8Array(3), [1, 1], 'sum', 0), 'counts add up to 2');
    await rejectsNaming(ringReducescatter(t, new Int8Array(3), [4, -1], 'sum', 0), 'counts[1]');
    await rejectsNaming(ringReducescatter(t, new Int8Array(2), [1, 1], 'average', 0), 'average');
    await rejectsNaming(ringReducescatter(t, new Int8Array(2), [1, 1], 'sum', 0, { segmentBytes: 0 }), 'segmentBytes');
  });
});

describe('ringReducescatter into out', () => {
  const wasm = createWasmKernels();
  for (const n of kSizes) {
    it(`N=${n}: every dtype, op, even, uneven and zero counts: out holds the reduction, bit for bit as in place`, async () => {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 11);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          const all = opsFor(dtype);
          const large = sum(counts) === kLarge;
          const ops = large ? all.filter((_, i) => (i + tag) % 2 === 0) : all;
          // The large buffer also runs the WebAssembly kernels (runs of 1 KiB and more), writing into out.
          const kernels = large && wasm && tag % 2 === 0 ? { kernels: wasm } : {};
          const options = (r: number) => ({ ...kMatrixOptions, ...kernels, pool: pools[r] });
          await checkReducescatterInto(world, dtype, counts, ops, tag++, options, random);
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          const ops: ReduceOp[] = isFloat(dtype) ? ['average', 'max'] : ['sum', 'bxor'];
          for (const counts of [evenBlocks(n + 1, n).lengths, countPatterns(n)[7] as number[]]) {
            await checkReducescatterInto(world, dtype, counts, ops, round, () => options, seeded(round));
          }
        }
        await world.closeAll();
      }
    }
  });

  it('writes all of out whatever it held, sends what the in-place ring sends, and needs no scratch on 2 ranks', async () => {
    for (const n of [2, 3, 4]) {
      const counts = [...evenBlocks(1001, n).lengths];
      counts[n - 1] = 0; // a rank with no rows gets an empty out
      const world = counting(n);
      const pools = world.map(() => new BufferPool());
      const options = (r: number) => ({ segmentBytes: 800, pool: pools[r] });
      const inputs = world.map((_, r) => new Float64Array(sum(counts)).fill(r + 1));
      for (const fill of [Number.NaN, 0, -1]) {
        const outs = counts.map((c) => new Float64Array(c).fill(fill));
        const bufs = inputs.map((a) => a.slice());
        await onEveryRank(world, (t, r) =>
          ringReducescatter(t, bufs[r] as TypedArray, counts, 'average', 0, options(r), outs[r] as TypedArray),
        );
        for (const [r, out] of outs.entries())
          assert.ok(
            out.every((v) => v === (n + 1) / 2),
            `N=${n} rank ${r} (out was ${fill})`,
          );
      }
      for (const t of world) {
        const r = t.rank;
        assert.equal(t.bytesSent, 3 * (sum(counts) - (counts[r] as number)) * 8, `N=${n} rank ${r}: bytes sent`);
        // The last reduce step receives into out: a 2-rank ring has no other, so no scratch.
        if (n === 2) assert.equal((pools[r] as BufferPool).allocations, 0, `rank ${r}: scratch buffers`);
      }
      await closeAll(world);
    }
  });

  it('copies on 1 rank and does nothing for an empty buffer', async () => {
    const [solo] = createMemoryWorld(1, kFast);
    const out = new Float32Array(3).fill(Number.NaN);
    await ringReducescatter(solo as Transport, Float32Array.of(1, 2, 4), [3], 'average', 0, {}, out);
    assert.deepEqual([...out], [1, 2, 4]);
    const pair = createMemoryWorld(2, kFast);
    await onEveryRank(pair, (t) => ringReducescatter(t, new Int32Array(0), [0, 0], 'sum', 0, {}, new Int32Array(0)));
    await closeAll([solo as Transport, ...pair]);
  });

  it('refuses an out of another dtype or length, or overlapping buf, naming it', async () => {
    const [a] = createMemoryWorld(2, kFast);
    const t = a as Transport;
    const buf = new Float32Array(8);
    await rejectsNaming(ringReducescatter(t, buf, [4, 4], 'sum', 0, {}, new Float64Array(4)), 'out must be a float32');
    await rejectsNaming(ringReducescatter(t, buf, [5, 3], 'sum', 0, {}, new Float32Array(4)), 'counts[rank] is 5');
    await rejectsNaming(ringReducescatter(t, buf, [4, 4], 'sum', 0, {}, buf.subarray(0, 4)), 'overlap');
    await rejectsNaming(ringReducescatter(t, buf, [4, 4], 'sum', 0, {}, buf.subarray(3, 7)), 'overlap');
    const shared = new Float32Array(12);
    const behind = shared.subarray(0, 8);
    await rejectsNaming(ringReducescatter(t, behind, [4, 4], 'sum', 0, {}, shared.subarray(7, 11)), 'overlap');
    await t.close();
  });
});

describe('treeReduce', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, op, count and root equals the serial reduction on the root`, async () => {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 11);
      let tag = 0;
      for (const [d, dtype] of kDTypes.entries()) {
        for (const count of countsFor(n)) {
          // Every root on the small counts; the larger ones take one root per dtype, rotating.
          const roots = count >= 1000 ? [(d + count) % n] : Array.from({ length: n }, (_, r) => r);
          // The large buffer takes the ops two at a time across dtypes, as for reduce-scatter.
          const ops = opsFor(dtype).filter((_, i) => count !== kLarge || (i + d) % 2 === 0);
          for (const root of roots) {
            await checkReduce(world, dtype, count, root, ops, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
          }
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          const random = seeded(round);
          await checkReduce(world, dtype, 2 * n + 1, round % n, ['sum', 'min'], round, () => options, random);
        }
        await world.closeAll();
      }
    }
  });

  it("gives the root the same bits on every run, whatever the timing, and the root's sends are log N", async () => {
    const n = 8;
    const random = seeded(99);
    const inputs = inputsFor('float32', 'sum', n, 301, random);
    let first: TypedArray | undefined;
    for (const seed of [1, 2, 3, 4]) {
      const world = counting(n, { jitter: { seed, maxHops: 6 }, ioTimeoutMs: 5000 });
      const bufs = inputs.map((a) => a.slice());
      await onEveryRank(world, (t, r) => treeReduce(t, bufs[r] as TypedArray, 'average', 3, 0, { segmentBytes: 64 }));
      first ??= bufs[3] as TypedArray;
      assert.ok(sameBytes(bufs[3] as TypedArray, first), `seed ${seed}: the root's result changed`);
      // Relative ranks 1, 2 and 4 send to the root; everyone else sends to a nearer node.
      assert.deepEqual(
        world.filter((t) => t.peersSentTo.has(3)).map((t) => t.rank),
        [4, 5, 7],
      );
      for (const t of world) assert.ok(t.largestMessage <= 64);
      await closeAll(world);
    }
    const expected = referenceReduce('float32', 'average', inputs);
    assert.equal(firstMismatch(first as TypedArray, expected, toleranceFor('float32', 'average', n)), undefined);
  });

  it('takes its receive scratch from the pool and gives it back', async () => {
    const world = createMemoryWorld(5, kFast);
    const pools = world.map(() => new BufferPool());
    for (let call = 0; call < 4; call++) {
      const bufs = world.map(() => new Int32Array(5000).fill(call));
      await onEveryRank(world, (t, r) =>
        treeReduce(t, bufs[r] as TypedArray, 'sum', 2, call, { pool: pools[r], segmentBytes: 1024 }),
      );
      assert.ok((bufs[2] as Int32Array).every((v) => v === 5 * call));
    }
    for (const [r, pool] of pools.entries()) {
      // Relative ranks 0, 2 (ranks 2, 4) have children; the leaves need no scratch.
      const inner = r === 2 || r === 4;
      assert.equal(pool.allocations, inner ? 1 : 0, `rank ${r}`);
      if (inner) assert.ok(pool.retainedBytes > 0, `rank ${r} kept its scratch`);
    }
    await world.closeAll();
  });

  it('refuses a root outside the world and ops that do not fit the dtype', async () => {
    const [a] = createMemoryWorld(2, kFast);
    await rejectsNaming(treeReduce(a as Transport, new Int8Array(3), 'sum', 2, 0), 'root');
    await rejectsNaming(treeReduce(a as Transport, new Int8Array(3), 'sum', -1, 0), 'root');
    await rejectsNaming(treeReduce(a as Transport, new Int8Array(3), 'average', 0, 0), 'average');
  });
});

describe('treeGather', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, even, uneven and empty blocks, from every root`, async () => {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 13);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          for (let root = 0; root < n; root++) {
            await checkGather(world, dtype, counts, root, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
          }
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          for (const counts of [evenBlocks(2 * n + 1, n).lengths, countPatterns(n)[7] as number[]]) {
            await checkGather(world, dtype, counts, round % n, round, () => options, seeded(round));
          }
        }
        await world.closeAll();
      }
    }
  });

  it('sends log N messages to the root for small blocks, and no message above segmentBytes', async () => {
    const n = 8;
    const counts = [3, 1, 5, 1, 2, 2, 4, 7];
    for (let root = 0; root < n; root++) {
      const world = counting(n);
      await checkGather(world, 'int32', counts, root, 0, () => ({ segmentBytes: 1024 }), seeded(root));
      // The root's children are relative ranks 1, 2 and 4; each sends its subtree in one message.
      const senders = world.filter((t) => t.peersSentTo.has(root)).map((t) => t.rank);
      assert.deepEqual(senders.sort(), [(root + 1) % n, (root + 2) % n, (root + 4) % n].sort());
      for (const r of senders) assert.equal((world[r] as CountingTransport).messages, 1, `root ${root}: rank ${r}`);
      await closeAll(world);
    }
    const world = counting(n);
    await checkGather(world, 'float64', [100, 0, 300, 1, 2, 2, 0, 700], 5, 0, () => ({ segmentBytes: 256 }), seeded(1));
    for (const t of world) assert.ok(t.largestMessage <= 256, `rank ${t.rank}: ${t.largestMessage} bytes`);
    await closeAll(world);
  });

  it('refuses bad arguments, naming them', async () => {
    const [a] = createMemoryWorld(2, kFast);
    const t = a as Transport;
    const out = new Int16Array(3);
    await rejectsNaming(treeGather(t, new Int16Array(1), out, [1, 2], 2, 0), 'root');
    await rejectsNaming(treeGather(t, new Int16Array(1), out, [1, 2, 0], 0, 0), 'counts');
    await rejectsNaming(treeGather(t, new Int16Array(2), out, [1, 2], 0, 0), 'input');
    await rejectsNaming(treeGather(t, new Int16Array(1), undefined, [1, 2], 0, 0), 'out');
    await rejectsNaming(treeGather(t, new Int16Array(1), new Int16Array(4), [1, 2], 0, 0), 'counts add up to 3');
    await rejectsNaming(treeGather(t, new Int16Array(1), new Int32Array(3), [1, 2], 0, 0), 'out');
  });
});

describe('treeScatter', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, even, uneven and empty blocks, from every root`, async () => {
      const world = createMemoryWorld(n, kFast);
      const pools = world.map(() => new BufferPool());
      const random = seeded(n * 17);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const counts of countPatterns(n)) {
          for (let root = 0; root < n; root++) {
            await checkScatter(world, dtype, counts, root, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
          }
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          for (const counts of [evenBlocks(2 * n + 1, n).lengths, countPatterns(n)[7] as number[]]) {
            await checkScatter(world, dtype, counts, round % n, round, () => options, seeded(round));
          }
        }
        await world.closeAll();
      }
    }
  });

  it('has the root send log N messages for small blocks, and no message above segmentBytes', async () => {
    const n = 8;
    const counts = [3, 1, 5, 1, 2, 2, 4, 7];
    for (let root = 0; root < n; root++) {
      const world = counting(n);
      await checkScatter(world, 'int32', counts, root, 0, () => ({ segmentBytes: 1024 }), seeded(root));
      const rootSends = world[root] as CountingTransport;
      assert.deepEqual([...rootSends.peersSentTo].sort(), [(root + 1) % n, (root + 2) % n, (root + 4) % n].sort());
      assert.equal(rootSends.messages, 3, `root ${root}`);
      assert.equal(rootSends.bytesSent, (sum(counts) - (counts[root] as number)) * 4, `root ${root}`);
      await closeAll(world);
    }
    const world = counting(n);
    await checkScatter(world, 'float64', [100, 0, 300, 1, 2, 2, 0, 700], 6, 0, () => ({ segmentBytes: 256 }), seeded(1));
    for (const t of world) assert.ok(t.largestMessage <= 256, `rank ${t.rank}: ${t.largestMessage} bytes`);
    await closeAll(world);
  });

  it('refuses bad arguments, naming them', async () => {
    const [a] = createMemoryWorld(2, kFast);
    const t = a as Transport;
    const input = new Uint8Array(3);
    await rejectsNaming(treeScatter(t, input, new Uint8Array(1), [1, 2], 5, 0), 'root');
    await rejectsNaming(treeScatter(t, input, new Uint8Array(1), [3], 0, 0), 'counts');
    await rejectsNaming(treeScatter(t, input, new Uint8Array(2), [1, 2], 0, 0), 'output');
    await rejectsNaming(treeScatter(t, undefined, new Uint8Array(1), [1, 2], 0, 0), 'input');
    await rejectsNaming(treeScatter(t, new Uint8Array(4), new Uint8Array(1), [1, 2], 0, 0), 'counts add up to 3');
    await rejectsNaming(treeScatter(t, new Int8Array(3), new Uint8Array(1), [1, 2], 0, 0), 'input');
  });
});

describe('alltoall', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, even, uneven, empty rows and empty columns`, async () => {
      const world = createMemoryWorld(n, kFast);
      const random = seeded(n * 19);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const matrix of matrixPatterns(n, random)) {
          await checkAlltoall(world, dtype, matrix, tag++, kMatrixOptions, random);
        }
      }
      await world.closeAll();
    });
  }

  it('survives tiny segments at every depth under slow, random and unbuffered delivery', async () => {
    let round = 0;
    for (const n of [2, 3, 5, 8]) {
      for (const delivery of kDeliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const options of kTinySegments) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          const random = seeded(round);
          const patterns = matrixPatterns(n, random);
          for (const matrix of [patterns[3], patterns.at(-4)] as number[][][]) {
            await checkAlltoall(world, dtype, matrix, round, options, random);
          }
        }
        await world.closeAll();
      }
    }
  });

  it('sends each block once over its direct link, in frames of at most segmentBytes, a bounded window at a time', async () => {
    const n = 5;
    const matrix = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (j === 2 ? 0 : 1000 + 10 * i + j)));
    const options = { segmentBytes: 1024, pipelineDepth: 3 };
    for (const delivery of [kFast, { rendezvous: true, ioTimeoutMs: 5000 }]) {
      const world = counting(n, delivery);
      await checkAlltoall(world, 'float64', matrix, 0, options, seeded(3));
      for (const t of world) {
        const r = t.rank;
        const row = matrix[r] as number[];
        assert.equal(t.bytesSent, (sum(row) - (row[r] as number)) * 8, `rank ${r}`);
        const expectedPeers = row.flatMap((c, j) => (c > 0 && j !== r ? [j] : []));
        assert.deepEqual([...t.peersSentTo].sort(), expectedPeers.sort(), `rank ${r}`);
        assert.ok(t.largestMessage <= 1024, `rank ${r}: ${t.largestMessage} bytes`);
        assert.ok(
          t.maxSending <= 3 && t.maxReceiving <= 3,
          `rank ${r}: ${t.maxSending} sends, ${t.maxReceiving} receives in flight`,
        );
      }
      await closeAll(world);
    }
  });

  it('refuses bad arguments, naming them', async () => {
    const [a] = createMemoryWorld(2, kFast);
    const t = a as Transport;
    const input = new Float32Array(3);
    const output = new Float32Array(4);
    await rejectsNaming(alltoall(t, input, [1], output, [1, 3], 0), 'sendCounts');
    await rejectsNaming(alltoall(t, input, [1, 2], output, [1, 3, 0], 0), 'recvCounts');
    await rejectsNaming(alltoall(t, input, [1, 1], output, [1, 3], 0), 'sendCounts add up to 2');
    await rejectsNaming(alltoall(t, input, [1, 2], output, [1, 2], 0), 'recvCounts add up to 3');
    await rejectsNaming(alltoall(t, input, [1, 2], new Float32Array(5), [2, 3], 0), 'recvCounts[0]');
    await rejectsNaming(alltoall(t, input, [1, 2], new Float64Array(4), [1, 3], 0), 'output');
  });
});
