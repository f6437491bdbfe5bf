/**
 * The simulator (src/transport/sim/): it honours the transport contract, its ports serialise
 * what a rank sends and receives, the simulated ring allreduce takes the time of its α-β formula,
 * and the same run gives the same virtual times.
 *
 * The ring's formula. With one segment per block (segmentBytes ≥ M/N) every step moves one block
 * as one message and waits for it: T = 2(N-1)·α + 2(N-1)/N·M·β, exactly. With k segments per block
 * a segment is forwarded as soon as it arrived, so the steps overlap and only the first segment
 * pays α at every hop: T = 2(N-1)·max(α + s·β, k·s·β) + min(α, (k-1)·s·β) for segments of s bytes
 * (ringAllreduceCost in src/algorithms/cost_model.ts). Once k·s·β ≥ α + s·β that is
 * 2(N-1)/N·M·β + α: the 2(N-1)·α of the formula shrinks to one α, which for a large M is within a
 * few percent of the formula.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { alltoall } from '../../src/algorithms/alltoall.js';
import { ringAllreduceCost } from '../../src/algorithms/cost_model.js';
import { recursiveDoublingAllreduce } from '../../src/algorithms/recursive_doubling.js';
import { type KernelSelector, selectKernel } from '../../src/algorithms/reduce.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { TimeoutError } from '../../src/core/errors.js';
import {
  createSimWorld,
  type NetworkParams,
  type SimTransport,
  type SimWorld,
  scaleDown,
} from '../../src/transport/sim/index.js';
import { casesFor, kContractIoTimeoutMs } from '../helpers/transport_contract.js';

const kAlpha = 10e-6;
const kBeta = 1e-10; // 10 GB/s
const kUniform: NetworkParams = { local: { alpha: kAlpha, beta: kBeta } };

/** A reduce kernel selector that also charges the rank's CPU for each reduction (γ). */
function charging(t: SimTransport): KernelSelector {
  return (dtype, op) => {
    const kernel = selectKernel(dtype, op);
    return (dst, dstOffset, src, srcOffset, length) => {
      t.compute(length * dst.BYTES_PER_ELEMENT);
      kernel(dst, dstOffset, src, srcOffset, length);
    };
  };
}

/** Runs `body` on every rank; resolves with each rank's virtual finishing time. */
async function finishTimes(world: SimWorld, body: (t: SimTransport) => Promise<void>): Promise<number[]> {
  const times = new Array<number>(world.length).fill(0);
  await Promise.all(
    world.map(async (t) => {
      await body(t);
      times[t.rank] = t.now();
    }),
  );
  return times;
}

/** The simulated time of a float32 ring allreduce of `bytes` on `ranks` ranks; checks the sums. */
async function ringTime(ranks: number, bytes: number, segmentBytes: number, network: NetworkParams = kUniform): Promise<number> {
  const scaled = scaleDown(bytes, 4, ranks, segmentBytes);
  const world = createSimWorld(ranks, { network, byteScale: scaled.byteScale });
  const bufs = world.map((t) => new Float32Array(scaled.elements).fill(t.rank + 1));
  const options = { segmentBytes: scaled.segmentBytes };
  const times = await finishTimes(world, (t) => ringAllreduce(t, bufs[t.rank] as Float32Array, 'sum', 5, options));
  const sum = (ranks * (ranks + 1)) / 2;
  for (const buf of bufs)
    assert.ok(
      buf.every((v) => v === sum),
      `${ranks} ranks: every element is ${sum}`,
    );
  await world.closeAll();
  return Math.max(...times);
}

function assertWithin(actual: number, expected: number, fraction: number, what: string): void {
  const error = Math.abs(actual / expected - 1);
  assert.ok(
    error <= fraction,
    `${what}: simulated ${actual * 1e3} ms, formula ${expected * 1e3} ms (off by ${(error * 100).toFixed(2)} %)`,
  );
}

describe('sim transport: the contract', () => {
  for (const size of [2, 3]) {
    // The deadline case measures real time; the virtual deadline has its own test below.
    for (const contractCase of casesFor(size, { canBreakLinks: true }).filter((c) => c.id !== 'recv-deadline')) {
      it(`${size} ranks: ${contractCase.title}`, async () => {
        const world = createSimWorld(size, { network: kUniform, ioTimeout: kContractIoTimeoutMs / 1000 });
        try {
          await contractCase.run({ size, local: world, breakLink: (a, b) => world.breakLink(a, b) });
        } finally {
          await world.closeAll();
        }
      });
    }
  }

  it('a receive that nothing can satisfy times out, stamped ioTimeout virtual seconds after it was posted', async () => {
    const world = createSimWorld(2, { network: kUniform, ioTimeout: 5 });
    await assert.rejects(
      (world[0] as SimTransport).recv(1, 77, new Uint8Array(8)),
      (e: unknown) => e instanceof TimeoutError && /rank 1\b/.test(e.message) && /\btag 77\b/.test(e.message),
    );
    assert.equal(world.clock.now, 5);
    await world.closeAll();
  });
});

describe('sim transport: the ports', () => {
  it('a message costs α + b·β; a rank sending to several peers at once sends one message at a time', async () => {
    const bytes = 1 << 20;
    const world = createSimWorld(5, { network: kUniform });
    const data = new Uint8Array(bytes);
    const arrived: number[] = [];
    await Promise.all([
      ...[1, 2, 3, 4].map((peer) => (world[0] as SimTransport).send(peer, 1, data)),
      ...[1, 2, 3, 4].map(async (peer) => {
        await (world[peer] as SimTransport).recv(0, 1, new Uint8Array(bytes));
        arrived.push(world.clock.now);
      }),
    ]);
    const one = bytes * kBeta;
    assert.deepEqual(
      arrived,
      [1, 2, 3, 4].map((k) => kAlpha + k * one),
    );
    await world.closeAll();
  });

  it('a rank receiving from several peers at once takes one message at a time', async () => {
    const bytes = 1 << 20;
    const world = createSimWorld(4, { network: kUniform });
    await Promise.all([
      ...[1, 2, 3].map((peer) => (world[peer] as SimTransport).send(0, 1, new Uint8Array(bytes))),
      ...[1, 2, 3].map((peer) => (world[0] as SimTransport).recv(peer, 1, new Uint8Array(bytes))),
    ]);
    assert.equal(world.clock.now, kAlpha + 3 * bytes * kBeta);
    await world.closeAll();
  });

  it('links between hosts cost their own α and β', async () => {
    const network: NetworkParams = { ranksPerHost: 2, local: { alpha: 1e-6, beta: 1e-11 }, remote: { alpha: 2e-5, beta: 1e-9 } };
    const world = createSimWorld(4, { network });
    const bytes = 1000;
    const time = async (from: number, to: number) => {
      const start = world.clock.now;
      await Promise.all([
        (world[from] as SimTransport).send(to, 1, new Uint8Array(bytes)),
        (world[to] as SimTransport).recv(from, 1, new Uint8Array(bytes)),
      ]);
      return world.clock.now - start;
    };
    assert.equal(await time(0, 1), 1e-6 + bytes * 1e-11);
    assert.ok(Math.abs((await time(1, 2)) - (2e-5 + bytes * 1e-9)) < 1e-15);
    await world.closeAll();
  });
});

describe('sim transport: the ring allreduce against its formula', () => {
  it('one segment per block: 2(N-1)·α + 2(N-1)/N·M·β within 1 %', async () => {
    for (const ranks of [2, 3, 8, 64]) {
      for (const bytes of [4096 * ranks, (1 << 18) * ranks, (1 << 22) * ranks]) {
        const formula = 2 * (ranks - 1) * kAlpha + ((2 * (ranks - 1)) / ranks) * bytes * kBeta;
        assertWithin(await ringTime(ranks, bytes, 1 << 30), formula, 0.01, `${ranks} ranks, ${bytes} B`);
      }
    }
  });

  it('pipelined: the pipelined formula within 1 %, and 2(N-1)·α + 2(N-1)/N·M·β within 3 % once M·β dominates', async () => {
    const model = { alpha: kAlpha, beta: kBeta, gamma: 0 };
    for (const [ranks, bytes, segment] of [
      [2, 1 << 24, 1 << 18],
      [4, 1 << 26, 1 << 20],
      [8, 1 << 20, 1 << 14], // latency-bound: 8 segments of 16 KiB per block, each 1.6 µs on the wire against α = 10 µs
      [16, 1 << 30, 4 << 20],
      [50, 50 << 20, 64 << 10],
    ] as const) {
      const simulated = await ringTime(ranks, bytes, segment);
      const what = `${ranks} ranks, ${bytes} B in segments of ${segment} B`;
      assertWithin(simulated, ringAllreduceCost(ranks, bytes, segment, model), 0.01, what);
      const formula = 2 * (ranks - 1) * kAlpha + ((2 * (ranks - 1)) / ranks) * bytes * kBeta;
      if (2 * (ranks - 1) * kAlpha < 0.02 * formula) assertWithin(simulated, formula, 0.03, what);
    }
  });

  it('on two hosts, the ring runs at the pace of its slowest link: 2(N-1)/N·M·β_remote + α_remote', async () => {
    // The ranks behind a local link run ahead, so the sender on each cross-host link always has
    // its next block ready: that link's port never idles, and its α is paid once.
    const ranks = 8;
    const bytes = 1 << 26;
    const remote = { alpha: 5 * kAlpha, beta: 4 * kBeta };
    const twoHosts: NetworkParams = { ranksPerHost: 4, local: { alpha: kAlpha, beta: kBeta }, remote };
    const formula = ((2 * (ranks - 1)) / ranks) * bytes * remote.beta + remote.alpha;
    assertWithin(await ringTime(ranks, bytes, 1 << 30, twoHosts), formula, 0.01, '8 ranks on 2 hosts');
  });

  it('a scaled buffer takes the time of the full-size one', async () => {
    const bytes = 1 << 22;
    const full = createSimWorld(8, { network: kUniform });
    const bufs = full.map(() => new Float32Array(bytes / 4).fill(1));
    const times = await finishTimes(full, (t) =>
      ringAllreduce(t, bufs[t.rank] as Float32Array, 'sum', 1, { segmentBytes: 1 << 18 }),
    );
    assertWithin(await ringTime(8, bytes, 1 << 18), Math.max(...times), 1e-9, '4 MiB on 8 ranks, real and scaled');
    await full.closeAll();
  });
});

describe('sim transport: determinism', () => {
  /** Ring, recursive doubling and alltoall on 2 hosts, with reductions charged: every rank's time and result. */
  async function run(): Promise<{ times: number[][]; results: number[][] }> {
    const ranks = 12;
    const network: NetworkParams = {
      ranksPerHost: 4,
      local: { alpha: 2e-6, beta: 5e-11 },
      remote: { alpha: 2e-5, beta: 2e-10 },
      reduceSecondsPerByte: 3e-10,
    };
    const world = createSimWorld(ranks, { network });
    const times: number[][] = [];
    const results: number[][] = [];
    const elements = 3000;
    const bufs = world.map((t) => Float32Array.from({ length: elements }, (_, i) => Math.sin(i + t.rank * 0.37)));
    times.push(
      await finishTimes(world, (t) =>
        ringAllreduce(t, bufs[t.rank] as Float32Array, 'sum', 1, { segmentBytes: 1024, kernels: charging(t) }),
      ),
    );
    times.push(
      await finishTimes(world, (t) =>
        recursiveDoublingAllreduce(t, bufs[t.rank] as Float32Array, 'max', 2, { kernels: charging(t) }),
      ),
    );
    const counts = Array.from({ length: ranks }, (_, j) => 10 + j);
    const total = counts.reduce((a, b) => a + b, 0);
    const outs = world.map((t) => new Float32Array(ranks * (counts[t.rank] as number)));
    times.push(
      await finishTimes(world, (t) =>
        alltoall(
          t,
          (bufs[t.rank] as Float32Array).subarray(0, total),
          counts,
          outs[t.rank] as Float32Array,
          counts.map(() => counts[t.rank] as number),
          3,
          {
            segmentBytes: 16,
          },
        ),
      ),
    );
    for (const out of [...bufs, ...outs]) results.push([...out]);
    await world.closeAll();
    return { times, results };
  }

  it('the same run gives the same virtual times and the same bits', async () => {
    const first = await run();
    const second = await run();
    assert.deepEqual(second.times, first.times);
    assert.deepEqual(second.results, first.results);
    assert.ok(first.times.every((ts) => ts.every((t) => t > 0)));
  });
});
