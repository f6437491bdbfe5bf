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

import type { AlgorithmOf } from '../core/algorithm_names.js';

/** Seconds: α per message, β per byte sent, γ per byte reduced. */
export interface CostModel {
  readonly alpha: number;
  readonly beta: number;
  readonly gamma: number;
}

export const kDefaultCostModel: CostModel = Object.freeze({ alpha: 8.5e-6, beta: 0.2e-9, gamma: 0.28e-9 });

export type AllreduceAlgorithm = AlgorithmOf<'allreduce'>;

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

/**
 * Seconds for the binomial scatter of `bytes` in even blocks (tree_scatter.ts, farthest child
 * first): ⌈log2 N⌉·α + (N-1)/N·M·β, the root's stream with the subtrees' forwarding beneath it.
 */
export function treeScatterCost(ranks: number, bytes: number, model: CostModel): number {
  if (ranks < 2) return 0;
  return ceilLog2(ranks) * model.alpha + ((ranks - 1) / ranks) * bytes * model.beta;
}

/** Seconds for an allgather of `bytes` in even blocks as allgather.ts runs it: the cheaper of Bruck's and the ring. */
function evenAllgatherCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  const bruck = ceilLog2(ranks) * model.alpha + ((ranks - 1) / ranks) * bytes * model.beta;
  return Math.min(bruck, ringCost(ranks, bytes, segmentBytes, ranks - 1, 0, model));
}

/**
 * Seconds for scatter + allgather (scatter_allgather_broadcast.ts): the binomial scatter, then
 * Bruck's allgather (or the ring where its stream hides its steps):
 * 2·⌈log2 N⌉·α + 2(N-1)/N·M·β with Bruck's.
 */
export function scatterAllgatherBroadcastCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  if (ranks < 2) return 0;
  return treeScatterCost(ranks, bytes, model) + evenAllgatherCost(ranks, bytes, segmentBytes, model);
}

/**
 * From this many ranks on the engine chooses every collective by the cost model (with its
 * default α, β and γ unless given one): Bruck's allgather or the ring, recursive halving or the
 * ring for reduce-scatter, recursive doubling, the ring or Rabenseifner for allreduce, the tree,
 * the chain or scatter + allgather for broadcast. Below it
 * the choices stay the fixed ones that were measured fastest on 2 to 4 ranks (the ring;
 * recursive doubling up to 64 KiB for allreduce, and on 4 ranks Rabenseifner's from there to
 * kFourRankRabenseifnerMaxBytes), where a ring step costs more than the model's α.
 */
export const kCostChoiceMinRanks = 8;

/**
 * On exactly 4 ranks of one host, below kCostChoiceMinRanks, Rabenseifner's allreduce replaces the ring above
 * the latency threshold up to this many bytes: the same bytes in 4 steps instead of 6, where each
 * step's wake-ups cost more than its bytes; beyond it the ring's pipelined segments win
 * (docs/performance.md, "Rabenseifner's allreduce on 4 ranks").
 */
export const kFourRankRabenseifnerMaxBytes = 2 * 1024 * 1024;

/** p, the largest power of two ≤ `ranks`, and log2 p. */
export function powerOfTwoBelow(ranks: number): { p: number; levels: number } {
  let p = 1;
  let levels = 0;
  while (p * 2 <= ranks) {
    p *= 2;
    levels++;
  }
  return { p, levels };
}

/**
 * One step that sends and receives m bytes in segments of `segmentBytes`, reducing what arrives
 * when `reduces`: the last segment arrives α + m·β after the start; reductions overlap the rest,
 * so the step ends at α + m·max(β, γ) + s·min(β, γ) for a segment of s.
 */
function stepCost(m: number, segmentBytes: number, reduces: boolean, model: CostModel): number {
  if (m === 0) return 0;
  const { alpha, beta, gamma } = model;
  if (!reduces) return alpha + m * beta;
  return alpha + m * Math.max(beta, gamma) + Math.min(segmentBytes, m) * Math.min(beta, gamma);
}

function prefixSums(values: readonly number[]): number[] {
  const sums = [0];
  for (const v of values) sums.push((sums[sums.length - 1] as number) + v);
  return sums;
}

/** Bytes of blocks [first, first + count) mod N. */
function cyclicRun(sums: readonly number[], first: number, count: number): number {
  const n = sums.length - 1;
  const end = first + count;
  if (end <= n) return (sums[end] as number) - (sums[first] as number);
  return (sums[n] as number) - (sums[first] as number) + (sums[end - n] as number);
}

/**
 * Seconds for Bruck's allgather (bruck_allgather.ts) of blocks of `blockBytes[r]` bytes: at the
 * step of distance d every rank sends the run of min(d, N - d) blocks it starts, and the step
 * lasts as long as the longest run; with even blocks ⌈log2 N⌉·α + (N-1)/N·M·β.
 */
export function bruckAllgatherCost(blockBytes: readonly number[], model: CostModel): number {
  const n = blockBytes.length;
  const sums = prefixSums(blockBytes);
  let total = 0;
  for (let d = 1; d < n; d *= 2) {
    const c = Math.min(d, n - d);
    let longest = 0;
    for (let r = 0; r < n; r++) longest = Math.max(longest, cyclicRun(sums, r, c));
    total += stepCost(longest, 0, false, model);
  }
  return total;
}

/**
 * Seconds for a pipelined ring (ring_schedule.ts) over blocks of `blockBytes[r]` bytes: ringCost
 * with the largest block on the chain (the first segment's way round, the rest of that block
 * behind it) and the mean of the blocks a rank moves on the stream; for even blocks, ringCost.
 */
export function ringBlocksCost(
  blockBytes: readonly number[],
  segmentBytes: number,
  steps: number,
  reduceSteps: number,
  model: CostModel,
): number {
  const n = blockBytes.length;
  if (n < 2 || steps === 0) return 0;
  const { alpha, beta, gamma } = model;
  const largest = Math.max(...blockBytes);
  const mean = (blockBytes.reduce((a, b) => a + b, 0) - Math.min(...blockBytes)) / (n - 1);
  const s = Math.min(segmentBytes, largest);
  const hop = alpha + s * beta;
  const slowest = reduceSteps > 0 ? Math.max(beta, gamma) : beta;
  const chain = reduceSteps * (hop + s * gamma) + (steps - reduceSteps) * hop + (largest - s) * slowest;
  const stream = reduceSteps * mean * slowest + (steps - reduceSteps) * mean * beta + alpha;
  return Math.max(chain, stream);
}

/**
 * The p virtual ranks of the fold used by recursive halving and Rabenseifner when N is not a
 * power of two: virtual rank v < rem stands for ranks 2v and 2v + 1, the others for v + rem.
 * Returns the bytes of each virtual rank's blocks.
 */
function foldedBlocks(blockBytes: readonly number[]): number[] {
  const { p } = powerOfTwoBelow(blockBytes.length);
  const rem = blockBytes.length - p;
  const out: number[] = [];
  for (let v = 0; v < p; v++) {
    out.push(v < rem ? (blockBytes[2 * v] as number) + (blockBytes[2 * v + 1] as number) : (blockBytes[v + rem] as number));
  }
  return out;
}

/**
 * Seconds for recursive halving over p (a power of two) blocks of `blockBytes[v]` bytes: at the
 * step of distance d every rank sends half of its current range of 2d blocks and reduces the
 * other half as it arrives; the step lasts as long as the largest half. With even blocks
 * log2 p·α + (p-1)/p·M·max(β, γ) plus a segment's min(β, γ) per step.
 */
function halvingCost(blockBytes: readonly number[], segmentBytes: number, model: CostModel): number {
  const p = blockBytes.length;
  const sums = prefixSums(blockBytes);
  let total = 0;
  for (let d = p / 2; d >= 1; d /= 2) {
    let largest = 0;
    for (let lo = 0; lo < p; lo += d) largest = Math.max(largest, (sums[lo + d] as number) - (sums[lo] as number));
    total += stepCost(largest, segmentBytes, true, model);
  }
  return total;
}

/** The reverse of halvingCost: recursive doubling's allgather over p blocks, log2 p·α + (p-1)/p·M·β for even blocks. */
function doublingGatherCost(blockBytes: readonly number[], model: CostModel): number {
  const p = blockBytes.length;
  const sums = prefixSums(blockBytes);
  let total = 0;
  for (let d = 1; d < p; d *= 2) {
    let largest = 0;
    for (let lo = 0; lo < p; lo += d) largest = Math.max(largest, (sums[lo + d] as number) - (sums[lo] as number));
    total += stepCost(largest, 0, false, model);
  }
  return total;
}

/**
 * Seconds for recursive halving's reduce-scatter (recursive_halving.ts) of blocks of
 * `blockBytes[r]` bytes. When N is not a power of two, the first 2·rem ranks fold in pairs first
 * (the even one sends the whole buffer, which its partner reduces: one step of M bytes) and get
 * their block back at the end (one step of the largest such block):
 *   log2 p·α + (p-1)/p·M·max(β, γ) (+ α + M·max(β, γ) + α + b·β with a fold).
 */
export function recursiveHalvingCost(blockBytes: readonly number[], segmentBytes: number, model: CostModel): number {
  const n = blockBytes.length;
  if (n < 2) return 0;
  const { p } = powerOfTwoBelow(n);
  const rem = n - p;
  let cost = halvingCost(foldedBlocks(blockBytes), segmentBytes, model);
  if (rem > 0) {
    const total = blockBytes.reduce((a, b) => a + b, 0);
    let returned = 0;
    for (let v = 0; v < rem; v++) returned = Math.max(returned, blockBytes[2 * v] as number);
    cost += stepCost(total, segmentBytes, true, model) + stepCost(returned, 0, false, model);
  }
  return cost;
}

/**
 * Seconds for Rabenseifner's allreduce (rabenseifner_allreduce.ts) of `bytes` on `ranks` ranks:
 * recursive halving over p even blocks, then recursive doubling's allgather, with the fold's two
 * whole-buffer steps when N is not a power of two:
 *   2·log2 p·α + (p-1)/p·M·(max(β, γ) + β) (+ 2α + M·max(β, γ) + M·β with a fold).
 */
export function rabenseifnerAllreduceCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  if (ranks < 2) return 0;
  const { p } = powerOfTwoBelow(ranks);
  const blocks = new Array<number>(p).fill(bytes / p);
  let cost = halvingCost(blocks, segmentBytes, model) + doublingGatherCost(blocks, model);
  if (ranks !== p) cost += stepCost(bytes, segmentBytes, true, model) + stepCost(bytes, 0, false, model);
  return cost;
}

/**
 * Seconds for the pipelined binomial-tree reduce (tree_reduce.ts): the root takes in and reduces
 * ⌈log2 N⌉ buffers through one port, ⌈log2 N⌉·(α + s·min(β, γ)) + ⌈log2 N⌉·M·max(β, γ) for
 * segments of s; with γ = 0, ⌈log2 N⌉·(α + M·β).
 */
export function treeReduceCost(ranks: number, bytes: number, segmentBytes: number, model: CostModel): number {
  if (ranks < 2 || bytes === 0) return 0;
  const { alpha, beta, gamma } = model;
  const levels = ceilLog2(ranks);
  return levels * (alpha + Math.min(segmentBytes, bytes) * Math.min(beta, gamma)) + levels * bytes * Math.max(beta, gamma);
}

/**
 * Seconds for Rabenseifner's reduce (rabenseifner_reduce.ts) of `bytes` on `ranks` ranks to
 * `root`: recursive halving over p even blocks, then a binomial gather of (p-1)/p·M to the root,
 * with the fold's step of M bytes when N is not a power of two and one more when the root is
 * the even rank of a pair:
 *   2·log2 p·α + (p-1)/p·M·(max(β, γ) + β) (+ α + M·max(β, γ) (+ α + M·β)).
 */
export function rabenseifnerReduceCost(
  ranks: number,
  bytes: number,
  root: number,
  segmentBytes: number,
  model: CostModel,
): number {
  if (ranks < 2) return 0;
  const { p } = powerOfTwoBelow(ranks);
  const blocks = new Array<number>(p).fill(bytes / p);
  let cost = halvingCost(blocks, segmentBytes, model) + doublingGatherCost(blocks, model);
  const rem = ranks - p;
  if (rem > 0) cost += stepCost(bytes, segmentBytes, true, model);
  if (root < 2 * rem && root % 2 === 0) cost += stepCost(bytes, 0, false, model);
  return cost;
}
