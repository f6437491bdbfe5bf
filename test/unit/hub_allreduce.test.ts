/**
 * Allreduce through hubs (src/algorithms/hub_allreduce.ts) over the memory transport, with
 * leaves standing for browser ranks: the same bits as the flat ring for every dtype and op
 * (inputs exactly representable, so that float sums do not depend on their order) on every
 * layout of hubs and leaves, every rank ending with the same bits; reordering and unbuffered
 * deliveries; the stars hubsOf draws; and, over a byte-counting view, a leaf's bytes against
 * the flat ring's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allreduceRunsThroughHubs, hubAllreduce } from '../../src/algorithms/hub_allreduce.js';
import { hubsOf } from '../../src/algorithms/hubs.js';
import type { AlgorithmOptions } from '../../src/algorithms/options.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { isFloat, kDTypes } from '../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../src/core/types.js';
import { createMemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { exactInputs, onEveryRank } from './support/ranks.js';
import { opsFor, randomArray, referenceReduce, sameBytes, seeded } from './support/typed_data.js';

/** Which ranks are leaves (browser ranks), by layout. */
const kLayouts: readonly (readonly boolean[])[] = [
  [false, true],
  [false, false, true, true],
  [false, true, true, true],
  [true, false, true, false, false],
  [false, false, true, true, true, true, true],
];
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };
const kSmall: AlgorithmOptions = { segmentBytes: 16, pipelineDepth: 2 };
const kDeliveries: readonly MemoryWorldOptions[] = [
  { jitter: { seed: 3 }, ioTimeoutMs: 5000 },
  { rendezvous: true, ioTimeoutMs: 5000 },
  { rendezvous: true, jitter: { seed: 9 }, ioTimeoutMs: 5000 },
];

const describeLayout = (leaves: readonly boolean[]) => leaves.map((leaf) => (leaf ? 'L' : 'H')).join('');

async function flatAllreduce(inputs: readonly TypedArray[], op: ReduceOp): Promise<TypedArray[]> {
  const bufs = inputs.map((x) => x.slice());
  await onEveryRank(createMemoryWorld(inputs.length, kFast), (t) => ringAllreduce(t, bufs[t.rank] as TypedArray, op, 1, kSmall));
  return bufs;
}

async function hubRun(
  inputs: readonly TypedArray[],
  op: ReduceOp,
  leaves: readonly boolean[],
  world: MemoryWorldOptions = kFast,
  options: AlgorithmOptions = kSmall,
): Promise<TypedArray[]> {
  const bufs = inputs.map((x) => x.slice());
  const pool = new BufferPool(1 << 20);
  await onEveryRank(createMemoryWorld(inputs.length, world), (t) => {
    const hubs = hubsOf(t, leaves);
    assert.ok(hubs, 'a layout with hubs and leaves');
    return hubAllreduce(hubs, bufs[t.rank] as TypedArray, op, 7, { ...options, pool });
  });
  return bufs;
}

/** Every dtype and op on the layouts of 2 Node ranks and 2 tabs and of interleaved kinds; a few on the others. */
const kFullMatrix = new Set(['HHLL', 'LHLHH']);
const kFewCombos: readonly [DType, ReduceOp][] = [
  ['float32', 'average'],
  ['float64', 'sum'],
  ['int32', 'max'],
  ['uint8', 'bxor'],
];

describe('allreduce through hubs', () => {
  for (const leaves of kLayouts) {
    const n = leaves.length;
    const name = describeLayout(leaves);
    const full = kFullMatrix.has(name);
    it(`${name}: ${full ? 'every dtype and op' : 'four dtypes and ops'}, lengths 0, 1, one segment and one element, several segments, as the flat ring, the same bits everywhere`, async () => {
      const combos = full ? kDTypes.flatMap((dtype) => opsFor(dtype).map((op) => [dtype, op] as const)) : kFewCombos;
      for (const [dtype, op] of combos) {
        for (const length of [0, 1, 17, 257]) {
          const inputs = Array.from({ length: n }, (_, r) => exactInputs(dtype, op, length, 31 * r + length));
          const got = await hubRun(inputs, op, leaves);
          const flat = await flatAllreduce(inputs, op);
          const where = `${dtype} ${op} length ${length}`;
          for (let r = 0; r < n; r++) {
            assert.ok(sameBytes(got[r] as TypedArray, flat[r] as TypedArray), `${where} rank ${r}`);
            assert.ok(sameBytes(got[r] as TypedArray, got[0] as TypedArray), `${where} rank ${r} against rank 0`);
          }
          if (!isFloat(dtype)) assert.ok(sameBytes(got[0] as TypedArray, referenceReduce(dtype, op, inputs)), where);
        }
      }
    });
  }

  it('keeps its segments and phases apart under reordering and unbuffered deliveries', async () => {
    for (const world of kDeliveries) {
      for (const leaves of kLayouts) {
        const inputs = leaves.map((_, r) => exactInputs('int32', 'sum', 101, r));
        const got = await hubRun(inputs, 'sum', leaves, world, { segmentBytes: 4, pipelineDepth: 3 });
        const expected = referenceReduce('int32', 'sum', inputs);
        for (const [r, out] of got.entries()) {
          assert.ok(sameBytes(out, expected), `${JSON.stringify(world)} ${describeLayout(leaves)} rank ${r}`);
        }
      }
    }
  });

  it('random floats: every rank ends with the hubs’ bits, an average included', async () => {
    const leaves = [false, false, true, true, true];
    const inputs = leaves.map((_, r) => randomArray('float32', 1000, seeded(r + 40)));
    const got = await hubRun(inputs, 'average', leaves, kFast, { segmentBytes: 256 });
    for (const [r, out] of got.entries()) assert.ok(sameBytes(out, got[0] as TypedArray), `rank ${r}`);
    const reference = referenceReduce('float32', 'average', inputs) as Float32Array;
    for (let i = 0; i < 1000; i++)
      assert.ok(Math.abs((got[0] as Float32Array)[i] - (reference[i] as number)) < 1e-5, `element ${i}`);
  });

  it('a leaf sends and receives the buffer once; under the ring it moves 2(N-1)/N of it each way', async () => {
    const leaves = [false, false, true, true];
    const length = 4096;
    const counted = (world: Transport[]) =>
      world.map((t) => {
        const bytes = { sent: 0 };
        const view: Transport = Object.create(t);
        view.send = (peer, tag, data) => {
          bytes.sent += data.byteLength;
          return t.send(peer, tag, data);
        };
        return { view, bytes };
      });
    const hubWorld = counted(createMemoryWorld(4, kFast));
    await onEveryRank(
      hubWorld.map((c) => c.view),
      (t) =>
        hubAllreduce(hubsOf(t, leaves) as NonNullable<ReturnType<typeof hubsOf>>, new Float32Array(length), 'sum', 3, kSmall),
    );
    const ringWorld = counted(createMemoryWorld(4, kFast));
    await onEveryRank(
      ringWorld.map((c) => c.view),
      (t) => ringAllreduce(t, new Float32Array(length), 'sum', 3, kSmall),
    );
    const bytes = length * 4;
    for (const r of [2, 3]) {
      assert.equal(hubWorld[r]?.bytes.sent, bytes, `leaf ${r} through its hub`);
      assert.equal(ringWorld[r]?.bytes.sent, (2 * 3 * bytes) / 4, `rank ${r} in the ring`);
    }
  });

  it("'auto' runs through hubs where the flat allreduce would run the ring; 'on' always; 'off' and no hubs never", () => {
    const [t] = createMemoryWorld(4, kFast) as Transport[];
    const hubs = hubsOf(t as Transport, [false, false, true, true]);
    assert.equal(allreduceRunsThroughHubs('auto', hubs, 64 * 1024), false);
    assert.equal(allreduceRunsThroughHubs('auto', hubs, 64 * 1024 + 4), true);
    assert.equal(allreduceRunsThroughHubs('on', hubs, 4), true);
    assert.equal(allreduceRunsThroughHubs('off', hubs, 1 << 24), false);
    assert.equal(allreduceRunsThroughHubs('on', undefined, 1 << 24), false);
  });
});

describe('hubs and their leaves', () => {
  it('leaf i hangs off hub i mod H; a hub sees its star and the hubs, a leaf only its star', () => {
    const leaves = [false, true, false, true, true, false, true];
    // Hubs 0, 2 and 5; leaves 1, 3, 4 and 6 hang off hubs 0, 2, 5 and 0: stars [0, 1, 6], [2, 3], [5, 4].
    const views = createMemoryWorld(7, kFast).map((t) => {
      const hubs = hubsOf(t, leaves);
      return [hubs?.star.size, hubs?.star.rank, hubs?.hubs?.size, hubs?.hubs?.rank];
    });
    assert.deepEqual(views, [
      [3, 0, 3, 0],
      [3, 1, undefined, undefined],
      [2, 0, 3, 1],
      [2, 1, undefined, undefined],
      [2, 1, undefined, undefined],
      [2, 0, 3, 2],
      [3, 2, undefined, undefined],
    ]);
  });

  it('none without both kinds', () => {
    const [t] = createMemoryWorld(3, kFast) as Transport[];
    assert.equal(hubsOf(t as Transport, [false, false, false]), undefined);
    assert.equal(hubsOf(t as Transport, [true, true, true]), undefined);
    assert.throws(() => hubsOf(t as Transport, [true, false]), /2 leaf flags for a group of 3/);
  });
});
