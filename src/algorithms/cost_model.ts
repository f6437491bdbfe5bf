/**
 * The cost model that picks an allreduce algorithm: α per message, β per byte on the wire, γ per
 * byte reduced, and the rank count. The simulator (src/transport/sim/) runs the real algorithms
 * under the same model, and docs/performance.md ("Simulated scaling") shows both side by side.
 *
 * Recursive doubling (recursive_doubling.ts), with p the largest power of two ≤ N, L = log2 p and
 * e = 1 when N ≠ p (the fold), else 0: L + 2e messages of M bytes in sequence, each reduced on
 * arrival but the last one of the fold; the first exchange after the fold finds its partner's
 * message already there, which hides one α:
 *
 *   T_rd = (L + e)·α + (L + 2e)·M·β + (L + e)·M·γ
 *
 * Pipelined ring (ring_allreduce.ts): 2(N-1) steps, the first N-1 reducing, each moving a block of
 * B = M/N bytes in segments of s = min(S, B) bytes, forwarded as soon as they arrived. The time is
 * the larger of two bounds: the chain, the first segment's way through every hop with the rest of
 * the last block behind it; and the stream, every block through the rank's ports, where a rank
 * that reduces cannot post its next send meanwhile, so a reducing step goes at the slower of the
 * wire and the CPU:
 *
 *   chain  = (N-1)·(α + sβ + sγ) + (N-1)·(α + sβ) + (B - s)·max(β, γ)
 *   stream = (N-1)·B·max(β, γ) + (N-1)·B·β + α
 *   T_ring = max(chain, stream)
 *
 * With one segment per block (s = B) that is the textbook 2(N-1)·α + 2(N-1)/N·M·β plus
 * (N-1)/N·M·γ, and with γ = 0 and many segments it tends to 2(N-1)/N·M·β + α: the α terms but one
 * hide behind the stream. Both match the simulator to a fraction of a percent. With γ > 0 and
 * several segments per block the simulator is up to 16 % faster (a rank's send port drains
 * the sends it queued before a reduction), far above any crossover. Small buffers favour
 * recursive doubling (log2 N messages against 2(N-1)), large ones the ring (2M bytes against
 * M·log2 N), and the crossover grows with N: about 60 KiB at 2 ranks, 110 KiB at 8, 4 MiB at 1024
 * with the defaults below.
 *
 * The defaults were measured on the 2-core VM where ringreduce is developed (loopback, one host):
 * α from the 4 B round trip of `node dist/bench/tcp_pingpong.js 5000 4` (17 µs, halved), β from
 * the 16 MiB round trip (6.8 ms: 5 GB/s), γ from the float32 sum SIMD kernel of
 * `node dist/bench/reduce_kernels.js` (3.6 GB/s). A cluster should pass its own (`costModel`).
 */

/** Seconds: α per message, β per byte sent, γ per byte reduced. */
export interface CostModel {
  readonly alpha: number;
  readonly beta: number;
  readonly gamma: number;
}

export const kDefaultCostModel: CostModel = Object.freeze({ alpha: 8.5e-6, beta: 0.2e-9, gamma: 0.28e-9 });

export type AllreduceAlgorithm = 'recursive_doubling' | 'ring';

/** Seconds for recursive doubling of `bytes` on `ranks` ranks. */
export function recursiveDoublingCost(ranks: number, bytes: number, model: CostModel): number {
  if (ranks < 2) return 0;
  let p = 1;
  let levels = 0;
  while (p * 2 <= ranks) {
    p *= 2;
    levels++;
  }
  const fold = ranks === p ? 0 : 1;
  const { alpha, beta, gamma } = model;
  return (levels + fold) * (alpha + bytes * gamma) + (levels + 2 * fold) * bytes * beta;
}

/**
 * Seconds for a pipelined ring of `steps` steps over blocks of `bytes / ranks`, the first
 * `reduceSteps` of them reducing: 2(N-1) and N-1 for allreduce, N-1 and N-1 for reduce-scatter,
 * N-1 and 0 for allgather.
 */
export function ringCost(
  ranks: number,
  bytes: number,
  segmentBytes: number,
  steps: number,
  reduceSteps: number,
  model: CostModel,
): number {
  if (ranks < 2 || steps === 0) return 0;
  const { alpha, beta, gamma } = model;
  const block = bytes / ranks;
  const s = Math.min(segmentBytes, block);
  const hop = alpha + s * beta;
  const slowest = reduceSteps > 0 ? Math.max(beta, gamma) : beta;
  const chain = reduceSteps * (hop + s * gamma) + (steps - reduceSteps) * hop + (block - s) * slowest;
  const stream = reduceSteps * block * slowest + (steps - reduceSteps) * block * beta + alpha;
  return Math.max(chain, stream);
}

/** Seconds for the pipelined ring allreduce of `bytes` on `ranks` ranks. */
export function ringAllreduceCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  return ringCost(ranks, bytes, segmentBytes, 2 * (ranks - 1), ranks - 1, model);
}

/**
 * The cheaper allreduce for `bytes` on `ranks` ranks (recursive doubling on a tie). A function
 * of its arguments only, so every rank that passes the same ones picks the same algorithm.
 */
export function chooseAllreduce(ranks: number, bytes: number, segmentBytes: number, model: CostModel): AllreduceAlgorithm {
  const rd = recursiveDoublingCost(ranks, bytes, model);
  return rd <= ringAllreduceCost(ranks, bytes, segmentBytes, model) ? 'recursive_doubling' : 'ring';
}

const ceilLog2 = (n: number) => (n <= 1 ? 0 : Math.ceil(Math.log2(n)));

/** Seconds for a binomial-tree broadcast of `bytes` (broadcast.ts): ⌈log2 N⌉·(α + M·β). */
export function treeBroadcastCost(ranks: number, bytes: number, model: CostModel): number {
  return ceilLog2(ranks) * (model.alpha + bytes * model.beta);
}

/** Seconds for a chain broadcast in segments of `segmentBytes` (broadcast.ts): (N - 2 + K)·(α + S·β). */
export function chainBroadcastCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  if (ranks < 2 || bytes === 0) return 0;
  const segments = Math.ceil(bytes / segmentBytes);
  return (ranks - 2 + segments) * (model.alpha + Math.min(segmentBytes, bytes) * model.beta);
}

/** Seconds for scatter + allgather (scatter_allgather_broadcast.ts): (⌈log2 N⌉ + N - 1)·α + 2(N-1)/N·M·β. */
export function scatterAllgatherBroadcastCost(ranks: number, bytes: number, model: CostModel): number {
  if (ranks < 2) return 0;
  return (ceilLog2(ranks) + ranks - 1) * model.alpha + ((2 * (ranks - 1)) / ranks) * bytes * model.beta;
}
