/**
 * Hierarchical allreduce and allgather (src/algorithms/hierarchical_*.ts) over the memory
 * transport with a host layout: the same bits as the flat ring for every dtype and op (inputs
 * exactly representable, so that float sums do not depend on their order), uneven and empty
 * chunks, deliveries that reorder, and the layouts that qualify; then, over a byte-counting
 * view that knows each rank's host, the cross-host bytes per rank against the flat ring's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hierarchicalAllgather } from '../../src/algorithms/hierarchical_allgather.js';
import { allreduceRunsHierarchically, hierarchicalAllreduce } from '../../src/algorithms/hierarchical_allreduce.js';
import { type HostLayout, hierarchyOf, uniformHostLayout } from '../../src/algorithms/hierarchy.js';
import type { AlgorithmOptions } from '../../src/algorithms/options.js';
import { ringAllgather } from '../../src/algorithms/ring_allgather.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { constructorOf, isFloat, kDTypes } from '../../src/core/dtypes.js';
import type { ReduceOp, TypedArray } from '../../src/core/types.js';
import { hostsOf, type Placement } from '../../src/engine/topology.js';
import { createMemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { exactInputs, onEveryRank } from './support/ranks.js';
import { opsFor, randomArray, referenceReduce, sameBytes, seeded } from './support/typed_data.js';

/** [hosts, ranks per host] */
const kLayouts: readonly [number, number][] = [
  [2, 2],
  [3, 2],
  [2, 3],
];
const kFast: MemoryWorldOptions = { delivery: 'microtask', ioTimeoutMs: 5000 };
const kSmall: AlgorithmOptions = { segmentBytes: 64, pipelineDepth: 2 };
/** Reordering and unbuffered deliveries: phases that share a tag must still meet their own receives. */
const kDeliveries: readonly MemoryWorldOptions[] = [
  { jitter: { seed: 3 } },
  { rendezvous: true },
  { rendezvous: true, jitter: { seed: 9 } },
];

const layoutOf = (hosts: number, local: number): HostLayout => ({ localSize: local, crossSize: hosts });

async function flatAllreduce(inputs: readonly TypedArray[], op: ReduceOp, options = kSmall): Promise<TypedArray[]> {
  const bufs = inputs.map((x) => x.slice());
  const world = createMemoryWorld(inputs.length, kFast);
  await onEveryRank(world, (t) => ringAllreduce(t, bufs[t.rank] as TypedArray, op, 1, options));
  return bufs;
}

async function hierarchicalRun(
  inputs: readonly TypedArray[],
  op: ReduceOp,
  layout: HostLayout,
  world: MemoryWorldOptions = kFast,
  options: AlgorithmOptions = kSmall,
): Promise<TypedArray[]> {
  const bufs = inputs.map((x) => x.slice());
  const transports = createMemoryWorld(inputs.length, world);
  const pool = new BufferPool(1 << 20);
  await onEveryRank(transports, (t) =>
    hierarchicalAllreduce(hierarchyOf(t, layout), bufs[t.rank] as TypedArray, op, 7, { ...options, pool }),
  );
  return bufs;
}

describe('hierarchical allreduce', () => {
  for (const [hosts, local] of kLayouts) {
    const n = hosts * local;
    const layout = layoutOf(hosts, local);
    it(`${hosts} hosts × ${local}: every dtype and op, lengths 0, 1, L-1, L+1 and more, as the flat ring`, async () => {
      for (const dtype of kDTypes) {
        for (const op of opsFor(dtype)) {
          for (const length of [0, 1, local - 1, local + 1, n * 3 + 1, 1000]) {
            const inputs = Array.from({ length: n }, (_, r) => exactInputs(dtype, op, length, 17 * r + length));
            const got = await hierarchicalRun(inputs, op, layout);
            const flat = await flatAllreduce(inputs, op);
            const where = `${dtype} ${op} length ${length}`;
            for (let r = 0; r < n; r++) assert.ok(sameBytes(got[r] as TypedArray, flat[r] as TypedArray), `${where} rank ${r}`);
            if (!isFloat(dtype)) assert.ok(sameBytes(got[0] as TypedArray, referenceReduce(dtype, op, inputs)), where);
          }
        }
      }
    });
  }

  it('2^20 + 3 elements, in segments of 256 KiB: one dtype and op per layout', async () => {
    const length = 2 ** 20 + 3;
    const cases = [
      [2, 2, 'float32', 'average'],
      [3, 2, 'int32', 'bxor'],
      [2, 3, 'float64', 'sum'],
    ] as const;
    for (const [hosts, local, dtype, op] of cases) {
      const inputs = Array.from({ length: hosts * local }, (_, r) => exactInputs(dtype, op, length, r + 1));
      const options = { segmentBytes: 256 * 1024 };
      const got = await hierarchicalRun(inputs, op, layoutOf(hosts, local), kFast, options);
      const flat = await flatAllreduce(inputs, op, options);
      for (const [r, out] of got.entries())
        assert.ok(sameBytes(out, flat[r] as TypedArray), `${hosts}×${local} ${dtype} ${op} rank ${r}`);
    }
  });

  it('keeps its phases apart under reordering and unbuffered deliveries, with tiny segments', async () => {
    for (const delivery of kDeliveries) {
      for (const [hosts, local] of kLayouts) {
        const n = hosts * local;
        const inputs = Array.from({ length: n }, (_, r) => exactInputs('int32', 'sum', 37, r));
        const got = await hierarchicalRun(
          inputs,
          'sum',
          layoutOf(hosts, local),
          { ...delivery, ioTimeoutMs: 5000 },
          {
            segmentBytes: 8,
            pipelineDepth: 3,
          },
        );
        const expected = referenceReduce('int32', 'sum', inputs);
        for (const [r, out] of got.entries())
          assert.ok(sameBytes(out, expected), `${JSON.stringify(delivery)} ${hosts}×${local} rank ${r}`);
      }
    }
  });

  it("'auto' runs hierarchically where the flat allreduce would run the ring; 'on' always; 'off' and no layout never", () => {
    const [t] = createMemoryWorld(4, kFast) as Transport[];
    const hierarchy = hierarchyOf(t as Transport, layoutOf(2, 2));
    assert.equal(allreduceRunsHierarchically('auto', hierarchy, 64 * 1024), false);
    assert.equal(allreduceRunsHierarchically('auto', hierarchy, 64 * 1024 + 4), true);
    assert.equal(allreduceRunsHierarchically('on', hierarchy, 4), true);
    assert.equal(allreduceRunsHierarchically('off', hierarchy, 1 << 24), false);
    assert.equal(allreduceRunsHierarchically('on', undefined, 1 << 24), false);
  });
});

describe('hierarchical allgather', () => {
  for (const [hosts, local] of kLayouts) {
    const n = hosts * local;
    it(`${hosts} hosts × ${local}: even, uneven and empty blocks land in rank order, as the flat ring's`, async () => {
      const patterns = [
        new Array<number>(n).fill(0),
        new Array<number>(n).fill(1),
        Array.from({ length: n }, (_, r) => (r * 7) % 5),
        Array.from({ length: n }, (_, r) => (r === n - 1 ? 1001 : 0)),
        Array.from({ length: n }, (_, r) => 300 + r),
      ];
      for (const dtype of ['float32', 'int8', 'uint64'] as const) {
        for (const counts of patterns) {
          const total = counts.reduce((a, b) => a + b, 0);
          const offsets = counts.map((_, r) => counts.slice(0, r).reduce((a, b) => a + b, 0));
          const mine = counts.map((c, r) => randomArray(dtype, c, seeded(r + 5)));
          const run = async (flat: boolean, world: MemoryWorldOptions) => {
            const outs = counts.map((_, r) => {
              const out = new (constructorOf(dtype))(total);
              new Uint8Array(out.buffer).fill(0xa5);
              (out as Float64Array).set(mine[r] as Float64Array, offsets[r]);
              return out;
            });
            await onEveryRank(createMemoryWorld(n, world), (t) =>
              flat
                ? ringAllgather(t, outs[t.rank] as TypedArray, counts, 3, kSmall)
                : hierarchicalAllgather(hierarchyOf(t, layoutOf(hosts, local)), outs[t.rank] as TypedArray, counts, 3, kSmall),
            );
            return outs;
          };
          const [expected] = await run(true, kFast);
          for (const world of [kFast, { ...kDeliveries[2], ioTimeoutMs: 5000 }]) {
            const got = await run(false, world);
            for (const [r, out] of got.entries()) {
              assert.ok(sameBytes(out, expected as TypedArray), `${dtype} counts ${counts} rank ${r}`);
            }
          }
        }
      }
    });
  }
});

describe('host layouts', () => {
  it('qualify when uniform, host-major, with several ranks on each of several hosts', () => {
    assert.deepEqual(uniformHostLayout([0, 0, 1, 1]), { localSize: 2, crossSize: 2 });
    assert.deepEqual(uniformHostLayout([5, 5, 5, 2, 2, 2]), { localSize: 3, crossSize: 2 });
    assert.deepEqual(uniformHostLayout([0, 0, 1, 1, 2, 2]), { localSize: 2, crossSize: 3 });
    for (const hosts of [[0, 1, 0, 1], [0, 0, 0, 1], [0, 0, 1, 1, 0, 0], [0, 0], [0, 1, 2], [0, 0, 1], []]) {
      assert.equal(uniformHostLayout(hosts), undefined, JSON.stringify(hosts));
    }
  });

  it("take each rank's host from placements that describe hosts consistently, and none otherwise", () => {
    const place = (hostSizes: readonly number[]): Placement[] =>
      hostSizes.flatMap((l, crossRank) =>
        Array.from({ length: l }, (_, localRank) => ({ localRank, localSize: l, crossRank, crossSize: hostSizes.length })),
      );
    assert.deepEqual(hostsOf(place([2, 2])), [0, 0, 1, 1]);
    assert.deepEqual(hostsOf(place([2, 1, 3])), [0, 0, 1, 2, 2, 2]);
    // Open MPI's local values without a cross rank: every rank claims host 0.
    const noCross = place([2, 2]).map((p) => ({ ...p, crossRank: 0, crossSize: 1 }));
    assert.equal(hostsOf(noCross), undefined);
    assert.equal(hostsOf(place([2, 2]).map((p, r) => (r === 3 ? { ...p, localSize: 3 } : p))), undefined);
    assert.equal(hostsOf(place([2, 2]).map((p, r) => (r === 3 ? { ...p, crossSize: 3 } : p))), undefined);
    assert.equal(hostsOf(place([2, 2]).map((p) => ({ ...p, crossSize: 3 }))), undefined, 'a host with no rank');
  });
});

/** Counts the bytes a rank sends to ranks on other hosts (host = rank / L: host-major). */
class CrossHostCounter implements Transport {
  crossHostBytes = 0;
  constructor(
    private readonly inner: Transport,
    private readonly local: number,
  ) {}
  get rank() {
    return this.inner.rank;
  }
  get size() {
    return this.inner.size;
  }
  send(peer: number, tag: number, data: Uint8Array) {
    if (Math.floor(peer / this.local) !== Math.floor(this.rank / this.local)) this.crossHostBytes += data.byteLength;
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

describe('cross-host bytes per rank', () => {
  const bytes = 4 << 20;
  const options = { segmentBytes: 1 << 20 };
  /** Cross-host bytes each rank sent in one run of `run`. */
  async function crossHostBytes(hosts: number, local: number, run: (t: Transport) => Promise<void>): Promise<number[]> {
    const counters = createMemoryWorld(hosts * local, kFast).map((t) => new CrossHostCounter(t, local));
    await onEveryRank(counters, run);
    return counters.map((c) => c.crossHostBytes);
  }

  for (const [hosts, local] of kLayouts) {
    const n = hosts * local;
    it(`${hosts} hosts × ${local}: allreduce's busiest rank sends about L times less across hosts than the flat ring's`, async (t) => {
      const elements = bytes / 4;
      const flat = await crossHostBytes(hosts, local, (tr) => ringAllreduce(tr, new Float32Array(elements), 'sum', 1, options));
      const hier = await crossHostBytes(hosts, local, (tr) =>
        hierarchicalAllreduce(hierarchyOf(tr, layoutOf(hosts, local)), new Float32Array(elements), 'sum', 1, options),
      );
      // Flat: only the last rank of each host sends to the next host, 2(N-1)/N·M; hierarchical: every rank 2(H-1)/H·M/L.
      const close = (actual: number, expected: number) => Math.abs(actual - expected) <= 16;
      for (let r = 0; r < n; r++) {
        const boundary = r % local === local - 1;
        assert.ok(close(flat[r] as number, boundary ? (2 * (n - 1) * bytes) / n : 0), `flat rank ${r}: ${flat[r]}`);
        assert.ok(close(hier[r] as number, (2 * (hosts - 1) * bytes) / hosts / local), `hierarchical rank ${r}: ${hier[r]}`);
      }
      const ratio = Math.max(...flat) / Math.max(...hier);
      assert.ok(ratio >= local, `busiest rank: ${ratio}`);
      t.diagnostic(`busiest rank ${Math.max(...flat)} → ${Math.max(...hier)} bytes (÷${ratio.toFixed(2)})`);
    });

    it(`${hosts} hosts × ${local}: allgather's busiest rank sends (N-1)/(H-1) times less across hosts`, async () => {
      const block = Math.floor(bytes / 4 / n);
      const counts = new Array<number>(n).fill(block);
      const out = () => new Float32Array(block * n);
      const flat = await crossHostBytes(hosts, local, (tr) => ringAllgather(tr, out(), counts, 1, options));
      const hier = await crossHostBytes(hosts, local, (tr) =>
        hierarchicalAllgather(hierarchyOf(tr, layoutOf(hosts, local)), out(), counts, 1, options),
      );
      for (let r = 0; r < n; r++) {
        const boundary = r % local === local - 1;
        assert.equal(flat[r], boundary ? (n - 1) * block * 4 : 0, `flat rank ${r}`);
        assert.equal(hier[r], (hosts - 1) * block * 4, `hierarchical rank ${r}`);
      }
    });
  }
});
