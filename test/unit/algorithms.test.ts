import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { broadcast, broadcastAlgorithm } from '../../src/algorithms/broadcast.js';
import type { AlgorithmOptions } from '../../src/algorithms/options.js';
import { resolveOptions } from '../../src/algorithms/options.js';
import { ringAllgather } from '../../src/algorithms/ring_allgather.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { scatterAllgatherBroadcast } from '../../src/algorithms/scatter_allgather_broadcast.js';
import { chunkLength } from '../../src/algorithms/segments.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { constructorOf, isFloat, kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError, PeerFailureError } from '../../src/core/errors.js';
import type { DType, TypedArray } from '../../src/core/types.js';
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

const kSizes = [1, 2, 3, 4, 5];
const countsFor = (n: number) => [...new Set([0, 1, n - 1, n, n + 1, 1000, 2 ** 16])];
// Several segments per chunk at 2^16 elements, so the matrix exercises the pipeline too.
const kMatrixOptions: AlgorithmOptions = { segmentBytes: 16 * 1024, pipelineDepth: 3 };
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };

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

/** Records what a rank sends, to check the algorithms' traffic. */
class CountingTransport implements Transport {
  bytesSent = 0;
  readonly peersSentTo = new Set<number>();
  constructor(private readonly inner: Transport) {}
  get rank() {
    return this.inner.rank;
  }
  get size() {
    return this.inner.size;
  }
  send(peer: number, tag: number, data: Uint8Array) {
    this.bytesSent += data.byteLength;
    this.peersSentTo.add(peer);
    return this.inner.send(peer, tag, data);
  }
  recv(peer: number, tag: number, into: Uint8Array) {
    return this.inner.recv(peer, tag, into);
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

/** Allreduces fresh copies of `inputs` and checks every rank against the serial reference. */
async function checkAllreduce(
  world: readonly Transport[],
  dtype: DType,
  inputs: readonly TypedArray[],
  tag: number,
  options: (rank: number) => AlgorithmOptions,
  random: Random,
): Promise<void> {
  const n = world.length;
  for (const op of opsFor(dtype)) {
    const data = op === 'product' && isFloat(dtype) ? inputs.map((a) => randomArray(dtype, a.length, random, true)) : inputs;
    const bufs = data.map((a) => a.slice());
    await onEveryRank(world, (t, r) => ringAllreduce(t, bufs[r] as TypedArray, op, tag, options(r)));
    const expected = referenceReduce(dtype, op, data);
    const tolerance = toleranceFor(dtype, op, n);
    const where = `N=${n} ${dtype} ${op} count=${expected.length}`;
    assert.equal(firstMismatch(bufs[0] as TypedArray, expected, tolerance), undefined, where);
    // Every rank must hold the very same bits, floats included: replicas must not drift apart.
    for (const [r, buf] of bufs.entries())
      assert.ok(sameBytes(buf, bufs[0] as TypedArray), `${where}: rank ${r} differs from rank 0`);
  }
}

describe('ringAllreduce', () => {
  for (const n of kSizes) {
    for (const dtype of kDTypes) {
      it(`N=${n} ${dtype}: every count and op equals the serial reduction, on every rank`, async () => {
        const world = createMemoryWorld(n, kFast);
        const pools = world.map(() => new BufferPool());
        const random = seeded(n * 100 + dtype.length);
        let tag = 0;
        for (const count of countsFor(n)) {
          const inputs = world.map(() => randomArray(dtype, count, random));
          await checkAllreduce(world, dtype, inputs, tag++, (r) => ({ ...kMatrixOptions, pool: pools[r] }), random);
        }
        await world.closeAll();
      });
    }
  }

  // Average is a sum finished by a division, so this one op covers both at 2^20.
  it('float32 average of 2^20 elements with the default options', async () => {
    const random = seeded(2 ** 20);
    for (const n of kSizes) {
      const world = createMemoryWorld(n, kFast);
      const inputs = world.map(() => randomArray('float32', 2 ** 20, random));
      const bufs = inputs.map((a) => a.slice());
      await onEveryRank(world, (t, r) => ringAllreduce(t, bufs[r] as TypedArray, 'average', 0));
      const expected = referenceReduce('float32', 'average', inputs);
      assert.equal(firstMismatch(bufs[0] as TypedArray, expected, toleranceFor('float32', 'average', n)), undefined, `N=${n}`);
      for (const buf of bufs) assert.ok(sameBytes(buf, bufs[0] as TypedArray), `N=${n}: ranks differ`);
      await world.closeAll();
    }
  });

  it('pipelines tiny segments at every depth, under random delays and without any buffering', async () => {
    const deliveries: MemoryWorldOptions[] = [{ jitter: { seed: 3 } }, { rendezvous: true }, { delivery: 'macrotask' }];
    let round = 0;
    for (const n of [2, 3, 5]) {
      for (const delivery of deliveries) {
        const world = createMemoryWorld(n, { ...delivery, ioTimeoutMs: 5000 });
        for (const [segmentBytes, pipelineDepth] of [
          [1, 1],
          [8, 2],
          [24, 5],
        ] as const) {
          const dtype = kDTypes[round++ % kDTypes.length] as DType;
          const random = seeded(round);
          for (const count of [0, 1, n - 1, n + 1, 37]) {
            const inputs = world.map(() => randomArray(dtype, count, random));
            await checkAllreduce(world, dtype, inputs, round, () => ({ segmentBytes, pipelineDepth }), random);
          }
        }
        await world.closeAll();
      }
    }
  });

  it('sends 2(N-1)/N of the buffer per rank: every chunk but one, twice', async () => {
    const n = 4;
    const count = 1001;
    const world = createMemoryWorld(n, kFast).map((t) => new CountingTransport(t));
    const bufs = world.map(() => new Float64Array(count).fill(1));
    await onEveryRank(world, (t, r) => ringAllreduce(t, bufs[r] as TypedArray, 'sum', 0, { segmentBytes: 800 }));
    for (const t of world) {
      const r = t.rank;
      const elements = 2 * count - chunkLength(count, n, (r + 1) % n) - chunkLength(count, n, (r + 2) % n);
      assert.equal(t.bytesSent, elements * 8, `rank ${r}`);
      assert.deepEqual([...t.peersSentTo], [(r + 1) % n]);
    }
    assert.ok(bufs.every((b) => b.every((v) => v === n)));
    await Promise.all(world.map((t) => t.close()));
  });

  it('reuses its scratch from the pool across calls', async () => {
    const world = createMemoryWorld(3, kFast);
    const pools = world.map(() => new BufferPool());
    for (let call = 0; call < 4; call++) {
      const bufs = world.map(() => new Int32Array(5000).fill(call));
      await onEveryRank(world, (t, r) =>
        ringAllreduce(t, bufs[r] as TypedArray, 'sum', call, { pool: pools[r], segmentBytes: 1024 }),
      );
      assert.ok(bufs.every((b) => b.every((v) => v === 3 * call)));
    }
    for (const pool of pools) {
      assert.equal(pool.allocations, 1);
      assert.ok(pool.retainedBytes >= 4 * 1024, 'the scratch went back to the pool');
    }
    await world.closeAll();
  });

  it('keeps concurrent collectives apart by tag', async () => {
    const n = 4;
    const world = createMemoryWorld(n, { jitter: { seed: 11 } });
    const sums = world.map(() => new Float64Array(300).fill(1));
    const maxes = world.map((t) => new Int16Array(300).fill(t.rank));
    const bcast = world.map((t) => new Uint8Array(100).fill(t.rank === 2 ? 9 : 0));
    await onEveryRank(world, (t, r) =>
      Promise.all([
        ringAllreduce(t, sums[r] as TypedArray, 'sum', 1, { segmentBytes: 64 }),
        ringAllreduce(t, maxes[r] as TypedArray, 'max', 2, { segmentBytes: 64 }),
        broadcast(t, bcast[r] as TypedArray, 2, 3, { segmentBytes: 16 }),
      ]),
    );
    assert.ok(sums.every((b) => b.every((v) => v === n)));
    assert.ok(maxes.every((b) => b.every((v) => v === n - 1)));
    assert.ok(bcast.every((b) => b.every((v) => v === 9)));
    await world.closeAll();
  });

  it('leaves a single rank untouched, and refuses average on integers', async () => {
    const [solo] = createMemoryWorld(1, kFast);
    const buf = Float32Array.of(1.5, -2);
    await ringAllreduce(solo as Transport, buf, 'average', 0);
    assert.deepEqual([...buf], [1.5, -2]);
    await assert.rejects(ringAllreduce(solo as Transport, new Int32Array(2), 'average', 0), InvalidArgumentError);
    await assert.rejects(ringAllreduce(solo as Transport, buf, 'sum', 0, { segmentBytes: 0 }), /segmentBytes/);
  });

  it('rejects on every rank when one dies mid-collective, and only once nothing is in flight', async () => {
    const n = 4;
    // Rendezvous: the sends to the rank that never joins stay in flight until it dies.
    const world = createMemoryWorld(n, { rendezvous: true, ioTimeoutMs: 200 });
    const pools = world.map(() => new BufferPool());
    const bufs = world.map(() => new Float32Array(4000).fill(1));
    const running = world.map((t, r) =>
      r === 2
        ? new Promise<void>(() => {})
        : ringAllreduce(t, bufs[r] as TypedArray, 'sum', 0, { pool: pools[r], segmentBytes: 256 }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    world.kill(2);
    const outcomes = await Promise.allSettled([running[0], running[1], running[3]]);
    for (const outcome of outcomes) assert.equal(outcome.status, 'rejected');
    for (const r of [1, 3]) {
      const reason = (outcomes[r === 1 ? 1 : 2] as PromiseRejectedResult).reason;
      assert.ok(reason instanceof PeerFailureError && reason.peerRank === 2, `rank ${r}: ${reason}`);
    }
    for (const r of [0, 1, 3]) assert.ok((pools[r] as BufferPool).retainedBytes > 0, `rank ${r} released its scratch`);
    await world.closeAll();
  });
});

describe('ringAllgather', () => {
  const patterns = (n: number): number[][] => [
    ...countsFor(n).map((c) => Array<number>(n).fill(c)),
    [0, 3, 0, 7, 1].slice(0, n),
    [1000, 1, 0, 2 ** 16, 5].slice(0, n),
    Array.from({ length: n }, (_, r) => (r === n - 1 ? 17 : 0)),
    Array.from({ length: n }, (_, r) => (r === 0 ? 0 : r * 101)),
  ];

  for (const n of kSizes) {
    it(`N=${n}: every dtype, equal, uneven and empty blocks land on every rank`, async () => {
      const world = createMemoryWorld(n, kFast);
      const random = seeded(n);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const counts of patterns(n)) {
          const blocks = counts.map((c) => randomArray(dtype, c, random));
          const expected = concat(dtype, blocks);
          const outs = world.map(() => garbage(dtype, expected.length));
          let offset = 0;
          for (const [r, out] of outs.entries()) {
            (out as Float64Array).set(blocks[r] as Float64Array, offset);
            offset += counts[r] as number;
          }
          const call = tag++;
          await onEveryRank(world, (t, r) => ringAllgather(t, outs[r] as TypedArray, counts, call, kMatrixOptions));
          for (const [r, out] of outs.entries()) assert.ok(sameBytes(out, expected), `N=${n} ${dtype} [${counts}] rank ${r}`);
        }
      }
      await world.closeAll();
    });
  }

  it('forwards segments as they arrive, without any buffering', async () => {
    const n = 5;
    const world = createMemoryWorld(n, { rendezvous: true, ioTimeoutMs: 5000 });
    const counts = [9, 0, 33, 1, 20];
    const blocks = counts.map((c, r) => new Int32Array(c).fill(r + 1));
    const expected = concat('int32', blocks);
    const outs = world.map(() => new Int32Array(expected.length));
    let offset = 0;
    for (const [r, out] of outs.entries()) {
      out.set(blocks[r] as Int32Array, offset);
      offset += counts[r] as number;
    }
    await onEveryRank(world, (t, r) => ringAllgather(t, outs[r] as TypedArray, counts, 0, { segmentBytes: 8, pipelineDepth: 2 }));
    for (const out of outs) assert.ok(sameBytes(out, expected));
    await world.closeAll();
  });

  it('refuses counts that do not fit the output', async () => {
    const [a] = createMemoryWorld(2, kFast);
    await assert.rejects(ringAllgather(a as Transport, new Int8Array(3), [1, 1], 0), /add up to 2/);
    await assert.rejects(ringAllgather(a as Transport, new Int8Array(3), [3], 0), /one entry per rank/);
  });
});

describe('broadcast', () => {
  for (const n of kSizes) {
    it(`N=${n}: every dtype, count and root`, async () => {
      const world = createMemoryWorld(n, kFast);
      const random = seeded(n + 50);
      let tag = 0;
      for (const dtype of kDTypes) {
        for (const count of countsFor(n)) {
          for (let root = 0; root < n; root++) {
            const source = randomArray(dtype, count, random);
            const bufs = world.map((_, r) => (r === root ? source.slice() : garbage(dtype, count)));
            const call = tag++;
            await onEveryRank(world, (t, r) => broadcast(t, bufs[r] as TypedArray, root, call));
            for (const [r, buf] of bufs.entries())
              assert.ok(sameBytes(buf, source), `N=${n} ${dtype} count=${count} root=${root} rank ${r}`);
          }
        }
      }
      await world.closeAll();
    });
  }

  it('uses a binomial tree for one segment and a chain beyond, each correct from every root', async () => {
    const n = 5;
    for (const [bytes, shape] of [
      [1024, 'tree'],
      [1025, 'chain'],
    ] as const) {
      for (let root = 0; root < n; root++) {
        const world = createMemoryWorld(n, { rendezvous: true, ioTimeoutMs: 5000 }).map((t) => new CountingTransport(t));
        const source = randomArray('uint8', bytes, seeded(root));
        const bufs = world.map((t) => (t.rank === root ? source.slice() : garbage('uint8', bytes)));
        await onEveryRank(world, (t, r) => broadcast(t, bufs[r] as TypedArray, root, 0, { segmentBytes: 1024 }));
        for (const buf of bufs) assert.ok(sameBytes(buf, source));
        const rootSends = world[root] as CountingTransport;
        if (shape === 'tree') {
          // Relative ranks 4, 2 and 1: ceil(log2 5) messages from the root.
          assert.deepEqual([...rootSends.peersSentTo].sort(), [(root + 4) % n, (root + 2) % n, (root + 1) % n].sort());
        } else {
          // Chain: each rank sends the message once, to its right neighbour; the last sends nothing.
          for (const t of world) {
            const v = (t.rank - root + n) % n;
            assert.equal(t.bytesSent, v === n - 1 ? 0 : bytes, `root ${root} rank ${t.rank}`);
          }
        }
        await Promise.all(world.map((t) => t.close()));
      }
    }
  });

  it('scatter + allgather: correct from every root, for lengths below N, not divisible by N, and of many segments', async () => {
    for (const n of [8, 9, 12]) {
      const world = createMemoryWorld(n, kFast);
      for (const bytes of [5, 65, 1000, 4099]) {
        for (const root of n === 9 ? Array.from({ length: n }, (_, r) => r) : [0, n - 1]) {
          const source = randomArray('uint8', bytes, seeded(bytes + root));
          const bufs = world.map((t) => (t.rank === root ? source.slice() : garbage('uint8', bytes)));
          await onEveryRank(world, (t, r) =>
            scatterAllgatherBroadcast(t, bufs[r] as Uint8Array, root, bytes, { segmentBytes: 64 }),
          );
          for (const [r, buf] of bufs.entries()) assert.ok(sameBytes(buf, source), `N=${n} ${bytes} B root ${root} rank ${r}`);
        }
      }
      await world.closeAll();
    }
  });

  it('chooses scatter + allgather for a large message on 8 ranks and more when the cost model says so', async () => {
    const world = createMemoryWorld(8, kFast).map((t) => new CountingTransport(t));
    const length = (1 << 17) + 3;
    const source = new Float64Array(length).map((_, i) => i * 1.5);
    const bufs = world.map((t) => (t.rank === 3 ? source.slice() : new Float64Array(length)));
    assert.equal(broadcastAlgorithm(8, length * 8, resolveOptions({ segmentBytes: 64 << 10 })), 'scatter_allgather');
    await onEveryRank(world, (t, r) => broadcast(t, bufs[r] as TypedArray, 3, 0, { segmentBytes: 64 << 10 }));
    for (const buf of bufs) assert.ok(sameBytes(buf, source));
    // Unlike the tree and the chain, where leaves send nothing, every rank sends its block on.
    for (const t of world) assert.ok(t.bytesSent > 0, `rank ${t.rank} sent`);
    await Promise.all(world.map((t) => t.close()));
    const engine = resolveOptions({ segmentBytes: 4 << 20 });
    assert.equal(broadcastAlgorithm(7, 1 << 24, engine), 'chain');
    assert.equal(broadcastAlgorithm(8, 1 << 24, engine), 'scatter_allgather');
    assert.equal(broadcastAlgorithm(1024, 1 << 24, engine), 'scatter_allgather');
    assert.equal(broadcastAlgorithm(1024, 1 << 10, engine), 'tree');
  });

  it('refuses a root outside the world', async () => {
    const [a] = createMemoryWorld(2, kFast);
    await assert.rejects(broadcast(a as Transport, new Int8Array(3), 2, 0), InvalidArgumentError);
  });
});
