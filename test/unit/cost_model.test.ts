/**
 * The allreduce cost model (src/algorithms/cost_model.ts): it predicts what the simulator
 * measures of the real algorithms, its crossover grows with the rank count and stays near the old
 * fixed 64 KiB on 2 to 4 ranks, and allreduce runs what it picks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allreduce, allreduceAlgorithm } from '../../src/algorithms/allreduce.js';
import {
  type CostModel,
  chooseAllreduce,
  kDefaultCostModel,
  recursiveDoublingCost,
  ringAllreduceCost,
} from '../../src/algorithms/cost_model.js';
import { resolveOptions } from '../../src/algorithms/options.js';
import { recursiveDoublingAllreduce } from '../../src/algorithms/recursive_doubling.js';
import { type KernelSelector, selectKernel } from '../../src/algorithms/reduce.js';
import { ringAllreduce } from '../../src/algorithms/ring_allreduce.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { createSimWorld, type SimTransport, scaleDown } from '../../src/transport/sim/index.js';

const kSegment = 256 * 1024;

/** The smallest byte count at which the model picks the ring (1 B resolution). */
function crossover(ranks: number, segmentBytes = kSegment, model: CostModel = kDefaultCostModel): number {
  let lo = 1;
  let hi = 1 << 30;
  assert.equal(chooseAllreduce(ranks, hi, segmentBytes, model), 'ring', `${ranks} ranks: the ring at 1 GiB`);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (chooseAllreduce(ranks, mid, segmentBytes, model) === 'ring') hi = mid;
    else lo = mid;
  }
  return hi;
}

function charging(t: SimTransport): KernelSelector {
  return (dtype, op) => {
    const kernel = selectKernel(dtype, op);
    return (dst, dstOffset, src, srcOffset, length) => {
      t.compute(length * dst.BYTES_PER_ELEMENT);
      kernel(dst, dstOffset, src, srcOffset, length);
    };
  };
}

type Algorithm = typeof ringAllreduce;

/** The simulated time of `algorithm` on a float32 buffer, on a machine with the default model's α, β and γ. */
async function simulated(algorithm: Algorithm, ranks: number, bytes: number): Promise<number> {
  const { alpha, beta, gamma } = kDefaultCostModel;
  const scaled = scaleDown(bytes, 4, ranks, kSegment);
  const network = { local: { alpha, beta }, reduceSecondsPerByte: gamma };
  const world = createSimWorld(ranks, { network, byteScale: scaled.byteScale });
  const times = await Promise.all(
    world.map(async (t) => {
      const buf = new Float32Array(scaled.elements).fill(1);
      await algorithm(t, buf, 'sum', 1, { segmentBytes: scaled.segmentBytes, kernels: charging(t) });
      assert.equal(buf[0], ranks);
      return t.now();
    }),
  );
  await world.closeAll();
  return Math.max(...times);
}

describe('cost model: the choice', () => {
  it('recursive doubling for a few bytes and the ring for 1 GiB, on any rank count', () => {
    for (const ranks of [2, 3, 4, 5, 8, 100, 1024]) {
      assert.equal(chooseAllreduce(ranks, 4, kSegment, kDefaultCostModel), 'recursive_doubling', `${ranks} ranks, 4 B`);
      assert.equal(chooseAllreduce(ranks, 1 << 30, kSegment, kDefaultCostModel), 'ring', `${ranks} ranks, 1 GiB`);
    }
  });

  it('the crossover stays near the old fixed 64 KiB on 2 and 4 ranks, whatever the segment length', () => {
    for (const ranks of [2, 4]) {
      for (const segment of [kSegment, 4 << 20]) {
        const at = crossover(ranks, segment);
        assert.ok(at >= 48 * 1024 && at <= 96 * 1024, `${ranks} ranks, segments of ${segment} B: crossover at ${at} B`);
      }
    }
  });

  it('the crossover grows with the rank count, to megabytes at 1024 ranks', () => {
    let previous = 0;
    for (const ranks of [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]) {
      const at = crossover(ranks);
      assert.ok(at > previous, `${ranks} ranks: crossover at ${at} B, not above ${previous} B`);
      previous = at;
    }
    assert.ok(previous > 2 << 20, `1024 ranks: crossover at ${previous} B`);
  });

  it('moves with the machine: a larger α favours recursive doubling, a larger β the ring', () => {
    const base = crossover(8);
    assert.ok(crossover(8, kSegment, { ...kDefaultCostModel, alpha: 10 * kDefaultCostModel.alpha }) > base);
    assert.ok(crossover(8, kSegment, { ...kDefaultCostModel, beta: 10 * kDefaultCostModel.beta }) < base);
  });

  it('a fixed latencyMaxBytes (64 KiB by default) decides unless a costModel is given; a bad costModel names its field', () => {
    const fixed = resolveOptions({ latencyMaxBytes: 1024 });
    assert.equal(allreduceAlgorithm(1024, 1024, fixed), 'recursive_doubling');
    assert.equal(allreduceAlgorithm(1024, 1025, fixed), 'ring');
    // The default threshold holds below 8 ranks (kCostChoiceMinRanks); from there the model decides.
    assert.equal(allreduceAlgorithm(4, 64 * 1024, resolveOptions()), 'recursive_doubling');
    assert.equal(allreduceAlgorithm(2, 64 * 1024 + 1, resolveOptions()), 'ring');
    assert.equal(allreduceAlgorithm(3, 64 * 1024 + 1, resolveOptions()), 'ring');
    // 4 ranks of one host: Rabenseifner's between the threshold and 2 MiB (kFourRankRabenseifnerMaxBytes), the ring beyond.
    const oneHost = resolveOptions({ oneHost: true });
    assert.equal(allreduceAlgorithm(4, 64 * 1024 + 1, resolveOptions()), 'ring');
    assert.equal(allreduceAlgorithm(4, 64 * 1024, oneHost), 'recursive_doubling');
    assert.equal(allreduceAlgorithm(4, 64 * 1024 + 1, oneHost), 'rabenseifner');
    assert.equal(allreduceAlgorithm(4, 2 << 20, oneHost), 'rabenseifner');
    assert.equal(allreduceAlgorithm(4, (2 << 20) + 1, oneHost), 'ring');
    assert.equal(allreduceAlgorithm(2, 1 << 20, oneHost), 'ring');
    assert.equal(allreduceAlgorithm(4, 1 << 20, resolveOptions({ oneHost: true, latencyMaxBytes: 1024 })), 'ring');
    assert.equal(allreduceAlgorithm(1024, 64 * 1024 + 1, resolveOptions()), 'rabenseifner');
    assert.equal(allreduceAlgorithm(1024, 1 << 20, resolveOptions({ costModel: {} })), 'rabenseifner');
    assert.equal(allreduceAlgorithm(2, 1 << 20, resolveOptions({ costModel: {} })), 'ring');
    assert.equal(allreduceAlgorithm(2, 1 << 20, resolveOptions({ costModel: { beta: 0, gamma: 0 } })), 'recursive_doubling');
    assert.throws(
      () => resolveOptions({ costModel: { alpha: -1 } }),
      (e: unknown) => e instanceof InvalidArgumentError && /costModel\.alpha/.test(e.message),
    );
    assert.throws(() => resolveOptions({ costModel: { gamma: Number.NaN } }), InvalidArgumentError);
  });
});

describe('cost model: against the simulator', () => {
  it('predicts the simulated recursive doubling and single-segment ring within 1 %, and picks the faster one', async () => {
    for (const ranks of [2, 3, 4, 8, 16, 64]) {
      const at = crossover(ranks);
      for (const factor of [1 / 4, 4]) {
        // Whole elements per rank, so that the blocks split evenly.
        const bytes = Math.max(4 * ranks, Math.round((at * factor) / (64 * ranks)) * 64 * ranks);
        const ring = await simulated(ringAllreduce, ranks, bytes);
        const rd = await simulated(recursiveDoublingAllreduce, ranks, bytes);
        const what = `${ranks} ranks, ${bytes} B`;
        if (bytes / ranks <= kSegment) {
          const model = ringAllreduceCost(ranks, bytes, kSegment, kDefaultCostModel);
          assert.ok(Math.abs(ring / model - 1) < 0.01, `${what}: ring simulated ${ring}, model ${model}`);
        }
        const model = recursiveDoublingCost(ranks, bytes, kDefaultCostModel);
        assert.ok(Math.abs(rd / model - 1) < 0.01, `${what}: recursive doubling simulated ${rd}, model ${model}`);
        const faster = rd <= ring ? 'recursive_doubling' : 'ring';
        assert.equal(chooseAllreduce(ranks, bytes, kSegment, kDefaultCostModel), faster, what);
      }
    }
  });

  it('allreduce runs what the model picks (told apart by the messages a rank sends)', async () => {
    const ranks = 16;
    for (const [bytes, messages] of [
      [4096, 4], // recursive doubling: log2 16 exchanges
      [16 << 20, 2 * (ranks - 1) * 4], // the ring: 2(N-1) blocks of 1 MiB in 4 segments of 256 KiB
    ] as const) {
      const scaled = scaleDown(bytes, 4, ranks, kSegment);
      const world = createSimWorld(ranks, { network: { local: { alpha: 1e-5, beta: 1e-10 } }, byteScale: scaled.byteScale });
      const costModel = { beta: kDefaultCostModel.beta * scaled.byteScale, gamma: kDefaultCostModel.gamma * scaled.byteScale };
      await Promise.all(
        world.map((t) =>
          allreduce(t, new Float32Array(scaled.elements), 'sum', 1, { segmentBytes: scaled.segmentBytes, costModel }),
        ),
      );
      for (const t of world) assert.equal(t.messagesSent, messages, `${bytes} B: rank ${t.rank}`);
      await world.closeAll();
    }
  });
});
