/**
 * Allreduce, choosing the algorithm by the cost model (cost_model.ts): recursive doubling (fewest
 * messages) for small buffers, and for large ones the pipelined ring (least bytes per rank, its
 * α hidden behind the stream) or, on many ranks, Rabenseifner's (the ring's bytes in 2·log2 N
 * steps instead of 2(N-1)). Below kCostChoiceMinRanks ranks the choice stays the fixed one measured
 * on 2 to 4 ranks: recursive doubling up to `latencyMaxBytes` (64 KiB), the ring above, except on
 * 4 ranks of one host (`oneHost`), where Rabenseifner's runs up to kFourRankRabenseifnerMaxBytes
 * (a given `costModel` picks between recursive doubling and the ring there). A given
 * `latencyMaxBytes` decides at any rank count, between recursive doubling and the ring.
 * An algorithm forced in the options (RINGREDUCE_ALGORITHMS) runs at every size and rank count.
 * The choice depends only on the byte length, the rank count and the options, which every rank
 * of a collective shares, so every rank picks the same algorithm.
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import {
  type AllreduceAlgorithm,
  chooseAllreduce,
  kCostChoiceMinRanks,
  kFourRankRabenseifnerMaxBytes,
  rabenseifnerAllreduceCost,
  recursiveDoublingCost,
  ringAllreduceCost,
} from './cost_model.js';
import { type AlgorithmOptions, kDefaultLatencyMaxBytes, type ResolvedOptions, resolveOptions } from './options.js';
import { rabenseifnerAllreduce } from './rabenseifner_allreduce.js';
import { recursiveDoublingAllreduce } from './recursive_doubling.js';
import { ringAllreduce } from './ring_allreduce.js';

/**
 * @example
 *   await allreduce(transport, gradients, 'sum', tag, { pool });
 */
export function allreduce(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  switch (allreduceAlgorithm(transport.size, buf.byteLength, resolveOptions(options))) {
    case 'recursive_doubling':
      return recursiveDoublingAllreduce(transport, buf, op, tag, options);
    case 'rabenseifner':
      return rabenseifnerAllreduce(transport, buf, op, tag, options);
    default:
      return ringAllreduce(transport, buf, op, tag, options);
  }
}

/** What `allreduce` runs for `bytes` on `ranks` ranks with these options. */
export function allreduceAlgorithm(ranks: number, bytes: number, options: ResolvedOptions): AllreduceAlgorithm {
  const forced = options.algorithms?.allreduce;
  if (forced !== undefined) return forced;
  const { latencyMaxBytes, latencyMaxBytesGiven, segmentBytes, costModel } = options;
  if (latencyMaxBytesGiven) return bytes <= (latencyMaxBytes ?? kDefaultLatencyMaxBytes) ? 'recursive_doubling' : 'ring';
  if (ranks < kCostChoiceMinRanks && latencyMaxBytes !== undefined) {
    if (bytes <= latencyMaxBytes) return 'recursive_doubling';
    return ranks === 4 && options.oneHost && bytes <= kFourRankRabenseifnerMaxBytes ? 'rabenseifner' : 'ring';
  }
  if (ranks < kCostChoiceMinRanks) return chooseAllreduce(ranks, bytes, segmentBytes, costModel);
  const costs: [AllreduceAlgorithm, number][] = [
    ['recursive_doubling', recursiveDoublingCost(ranks, bytes, costModel)],
    ['ring', ringAllreduceCost(ranks, bytes, segmentBytes, costModel)],
    ['rabenseifner', rabenseifnerAllreduceCost(ranks, bytes, segmentBytes, costModel)],
  ];
  // The first of the cheapest: ties go to recursive doubling, then the ring.
  return costs.reduce((best, c) => (c[1] < best[1] ? c : best))[0];
}
