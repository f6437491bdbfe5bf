/**
 * Reduce-scatter with per-rank block sizes, choosing the algorithm by the cost model
 * (cost_model.ts): recursive halving (log2 N steps, plus the fold's two when N is not a power of
 * two; recursive_halving.ts) or the pipelined ring (N-1 steps, ring_reducescatter.ts). Below
 * kCostChoiceMinRanks ranks the ring always runs, as measured on 2 to 4 ranks; an algorithm forced
 * in the options (RINGREDUCE_ALGORITHMS) runs whatever the size. The choice depends
 * only on the counts, the element size, the rank count and the options, which every rank of a
 * collective shares.
 */
import type { AlgorithmOf } from '../core/algorithm_names.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { kCostChoiceMinRanks, recursiveHalvingCost, ringBlocksCost } from './cost_model.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { recursiveHalvingReducescatter } from './recursive_halving.js';
import { ringReducescatter } from './ring_reducescatter.js';

export type ReducescatterAlgorithm = AlgorithmOf<'reducescatter'>;

/**
 * Reduces block r of `buf` across all ranks into rank r's block r, or into `out`: the contract
 * of ringReducescatter.
 *
 * @example
 *   await reducescatter(transport, gradients, [4, 4, 3], 'average', tag, { pool }, myRows);
 */
export function reducescatter(
  transport: Transport,
  buf: TypedArray,
  counts: readonly number[],
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
  out?: TypedArray,
): Promise<void> {
  const blockBytes = counts.map((c) => c * buf.BYTES_PER_ELEMENT);
  if (reducescatterAlgorithm(blockBytes, resolveOptions(options)) === 'recursive_halving') {
    return recursiveHalvingReducescatter(transport, buf, counts, op, tag, options, out);
  }
  return ringReducescatter(transport, buf, counts, op, tag, options, out);
}

/** What `reducescatter` runs for blocks of `blockBytes[r]` bytes (one per rank) with these options. */
export function reducescatterAlgorithm(blockBytes: readonly number[], options: ResolvedOptions): ReducescatterAlgorithm {
  const forced = options.algorithms?.reducescatter;
  if (forced !== undefined) return forced;
  const ranks = blockBytes.length;
  if (ranks < kCostChoiceMinRanks) return 'ring';
  const { segmentBytes, costModel } = options;
  const ring = ringBlocksCost(blockBytes, segmentBytes, ranks - 1, ranks - 1, costModel);
  return recursiveHalvingCost(blockBytes, segmentBytes, costModel) < ring ? 'recursive_halving' : 'ring';
}
