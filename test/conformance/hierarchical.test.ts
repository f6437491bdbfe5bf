/**
 * Hierarchical allreduce and allgather through the whole stack: ranks as engine threads over TCP,
 * told their placements as a launcher would (local and cross rank and size), exchange them at
 * start-up, and then run allreduce (single, fused, every op) and allgather hierarchically or flat
 * as configured, with the same results; rr.stats() counts the bytes each rank sent to ranks of
 * other hosts, which shows which algorithm ran. A layout that is not uniform, placements that do
 * not say which host each rank is on, and a process set whose members are not host by host, run flat.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';
import { freePort, stopWorld } from '../helpers/world.js';

/** Ranks on hosts of the given sizes, host by host, as ringrun places them. */
async function startHosts(hostSizes: readonly number[], options: InitOptions = {}): Promise<RingReduce[]> {
  const port = await freePort();
  const jobId = randomBytes(6).toString('hex');
  const size = hostSizes.reduce((a, b) => a + b, 0);
  const placements = hostSizes.flatMap((localSize, crossRank) =>
    Array.from({ length: localSize }, (_, localRank) => ({ localRank, localSize, crossRank, crossSize: hostSizes.length })),
  );
  return Promise.all(
    placements.map((placement, rank) =>
      RingReduce.init({ rank, size, storeAddress: `127.0.0.1:${port}`, jobId, logLevel: 'error', ...placement, ...options }),
    ),
  );
}

const kBytes = 1 << 20;
const kElements = kBytes / 4;

/** Cross-host bytes each rank sent while `run` ran on every rank. */
async function crossHostSent(world: readonly RingReduce[], run: (rr: RingReduce, rank: number) => Promise<unknown>) {
  const before = world.map((rr) => rr.stats().crossHostSentBytes);
  await Promise.all(world.map(run));
  return world.map((rr, r) => rr.stats().crossHostSentBytes - (before[r] as number));
}

function assertNear(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= 16, `${what}: ${actual} bytes, expected about ${expected}`);
}

/** Small integers as floats: sums are exact in any order. */
const input = (rank: number, length = kElements) => Float32Array.from({ length }, (_, i) => ((i * 7 + rank * 3) % 11) - 5);

function expectedSum(size: number, length = kElements): Float32Array {
  const out = new Float32Array(length);
  for (let r = 0; r < size; r++) {
    const x = input(r, length);
    for (let i = 0; i < length; i++) out[i] = (out[i] as number) + (x[i] as number);
  }
  return out;
}

describe('hierarchical collectives through the engine', { timeout: 120_000 }, () => {
  for (const hostSizes of [
    [2, 2],
    [2, 2, 2],
  ]) {
    const hosts = hostSizes.length;
    const local = hostSizes[0] as number;
    const n = hosts * local;
    it(`${hosts} hosts × ${local}: on and off give the same sums; on sends about L times less across hosts from the busiest rank`, async () => {
      const sent: Record<string, number[]> = {};
      for (const mode of ['off', 'on'] as const) {
        const world = await startHosts(hostSizes, { hierarchicalAllreduce: mode, hierarchicalAllgather: mode });
        try {
          const results: Float32Array[] = [];
          sent[mode] = await crossHostSent(world, async (rr, r) => {
            results[r] = await rr.allreduce(input(r), { name: 'x' });
          });
          const expected = expectedSum(n);
          for (const [r, got] of results.entries()) assert.deepEqual(got, expected, `${mode} rank ${r}`);
        } finally {
          await stopWorld(world);
        }
      }
      const [off, on] = [sent.off as number[], sent.on as number[]];
      for (let r = 0; r < n; r++) {
        const boundary = r % local === local - 1;
        // Blocks of whole elements: within a few bytes of the formulas.
        assertNear(off[r] as number, boundary ? (2 * (n - 1) * kBytes) / n : 0, `off, rank ${r}`);
        assertNear(on[r] as number, (2 * (hosts - 1) * kBytes) / hosts / local, `on, rank ${r}`);
      }
    });
  }

  it('2 hosts × 2: every op, a fused step, uneven lengths and an allgather of uneven blocks, by default (auto)', async () => {
    const world = await startHosts([2, 2]);
    try {
      // Every op on 2^17 + 3 int32 (the ring's sizes: past the latency path), exactly as the flat reference.
      const length = 2 ** 17 + 3;
      const ints = (r: number) => Int32Array.from({ length }, (_, i) => (i * 2654435761 + r * 40503) | 0);
      for (const op of ['sum', 'min', 'max', 'product', 'band', 'bor', 'bxor'] as const) {
        const sent = await crossHostSent(world, async (rr, r) => {
          const got = await rr.allreduce(ints(r), { name: `op-${op}`, op });
          const expected = reference(op, [0, 1, 2, 3].map(ints));
          assert.deepEqual(got, expected, `${op} rank ${r}`);
        });
        assert.ok(
          sent.every((b) => b > 0),
          `${op}: every rank sent across hosts (hierarchical): ${sent}`,
        );
      }
      // A grouped (so fused) step of averages of uneven lengths.
      const lengths = [1, 3, 5, 40_001];
      const fused = await crossHostSent(world, async (rr, r) => {
        const outs = await rr.groupedAllreduce(
          lengths.map((l) => input(r, l)),
          { name: 'step', op: 'average' },
        );
        for (const [g, l] of lengths.entries()) {
          const expected = expectedSum(4, l).map((x) => x / 4);
          assert.deepEqual(outs[g], expected, `g${g} rank ${r}`);
        }
      });
      assert.ok(
        fused.every((b) => b > 0),
        `the fused buffer ran hierarchically: ${fused}`,
      );
      // Allgather of uneven blocks (rank r gives r·1000 + 1 rows of 3).
      const rows = (r: number) => r * 1000 + 1;
      const block = (r: number) => Int16Array.from({ length: rows(r) * 3 }, (_, i) => (i + r * 7) % 30_000);
      const gathered = await crossHostSent(world, async (rr, r) => {
        const got = await rr.allgather({ data: block(r), shape: [rows(r), 3] });
        assert.deepEqual(got.shape, [4 + 6000, 3]);
        const expected = new Int16Array((4 + 6000) * 3);
        let offset = 0;
        for (let q = 0; q < 4; q++) {
          expected.set(block(q), offset);
          offset += block(q).length;
        }
        assert.deepEqual(got.data, expected, `allgather rank ${r}`);
      });
      // Each rank sends its own block to the other host only: (H-1)·b.
      assert.deepEqual(
        gathered,
        [0, 1, 2, 3].map((r) => block(r).byteLength),
      );
    } finally {
      await stopWorld(world);
    }
  });

  it('hosts of different sizes, placements that do not name hosts, and a process set not laid out host by host, run flat', async () => {
    const uneven = await startHosts([3, 1], { hierarchicalAllreduce: 'on' });
    try {
      const sent = await crossHostSent(uneven, (rr, r) => rr.allreduce(input(r), { name: 'x' }));
      // The flat ring: rank 2 sends to rank 3 (the other host), rank 3 to rank 0.
      assert.deepEqual(sent, [0, 0, (2 * 3 * kBytes) / 4, (2 * 3 * kBytes) / 4]);
    } finally {
      await stopWorld(uneven);
    }
    // Local values without a cross rank (Open MPI's): the placements do not say which host is which.
    const unknown = await startHosts([2, 2], { crossRank: 0, crossSize: 1 });
    try {
      const sent = await crossHostSent(unknown, async (rr, r) => {
        assert.deepEqual(await rr.allreduce(input(r), { name: 'x' }), expectedSum(4), `rank ${r}`);
      });
      assert.deepEqual(sent, [0, 0, 0, 0]);
    } finally {
      await stopWorld(unknown);
    }
    const world = await startHosts([2, 2, 2], { hierarchicalAllreduce: 'on' });
    try {
      const aligned = await Promise.all(world.map((rr) => rr.addProcessSet([2, 3, 4, 5])));
      const straddling = await Promise.all(world.map((rr) => rr.addProcessSet([1, 2, 3, 4])));
      const inSet = async (set: number[], sets: typeof aligned) => {
        const members = world.filter((_, r) => set.includes(r));
        return crossHostSent(members, (rr) => {
          const processSet = sets[world.indexOf(rr)];
          return rr.allreduce(input(0), { name: 's', processSet });
        });
      };
      // Hosts 1 and 2, two ranks each: every member sends its half of the chunk across, 2(H-1)/H·M/L.
      assert.deepEqual(await inSet([2, 3, 4, 5], aligned), [kBytes / 2, kBytes / 2, kBytes / 2, kBytes / 2]);
      // Hosts 0, 1, 1, 2: the flat ring over the set, crossing hosts at 1→2, 3→4 and 4→1.
      const ring = (2 * 3 * kBytes) / 4;
      assert.deepEqual(await inSet([1, 2, 3, 4], straddling), [ring, 0, ring, ring]);
    } finally {
      await stopWorld(world);
    }
  });
});

/** The element-wise op of int32 inputs, wrapped as int32 arithmetic wraps. */
function reference(op: string, inputs: Int32Array[]): Int32Array {
  const out = Int32Array.from(inputs[0] as Int32Array);
  for (const x of inputs.slice(1)) {
    for (let i = 0; i < out.length; i++) {
      const a = out[i] as number;
      const b = x[i] as number;
      if (op === 'sum') out[i] = (a + b) | 0;
      else if (op === 'min') out[i] = Math.min(a, b);
      else if (op === 'max') out[i] = Math.max(a, b);
      else if (op === 'product') out[i] = Math.imul(a, b);
      else if (op === 'band') out[i] = a & b;
      else if (op === 'bor') out[i] = a | b;
      else out[i] = a ^ b;
    }
  }
  return out;
}
