/**
 * Allgather with per-rank block sizes, choosing the algorithm by the cost model (cost_model.ts):
 * Bruck's (⌈log2 N⌉ steps, bruck_allgather.ts) or the pipelined ring (N-1 steps,
 * ring_allgather.ts), which move the same bytes when blocks are even; the ring wins only where
 * its pipeline hides its extra steps, or with one block much larger than the others. Below
 * kCostChoiceMinRanks ranks the ring always runs, as measured on 2 to 4 ranks; an algorithm
 * forced in the options (RINGREDUCE_ALGORITHMS) runs whatever the size. The choice
 * depends only on the counts, the element size, the rank count and the options, which every
 * rank of a collective shares.
 */
import type { AlgorithmOf } from '../core/algorithm_names.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { bruckAllgather } from './bruck_allgather.js';
import { bruckAllgatherCost, kCostChoiceMinRanks, ringBlocksCost } from './cost_model.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { ringAllgather } from './ring_allgather.js';

export type AllgatherAlgorithm = AlgorithmOf<'allgather'>;

/**
 * Fills `out` with the blocks of all ranks, as ringAllgather does (same contract).
 *
 * @example
 *   out.set(mine, offsetOfMyBlock);
 *   await allgather(transport, out, [3, 0, 5], tag);
 */
export function allgather(
  transport: Transport,
  out: TypedArray,
  counts: readonly number[],
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const blockBytes = counts.map((c) => c * out.BYTES_PER_ELEMENT);
  if (allgatherAlgorithm(blockBytes, resolveOptions(options)) === 'bruck') {
    return bruckAllgather(transport, out, counts, tag, options);
  }
  return ringAllgather(transport, out, counts, tag, options);
}

/** What `allgather` runs for blocks of `blockBytes[r]` bytes (one per rank) with these options. */
export function allgatherAlgorithm(blockBytes: readonly number[], options: ResolvedOptions): AllgatherAlgorithm {
  const forced = options.algorithms?.allgather;
  if (forced !== undefined) return forced;
  const ranks = blockBytes.length;
  if (ranks < kCostChoiceMinRanks) return 'ring';
  const ring = ringBlocksCost(blockBytes, options.segmentBytes, ranks - 1, 0, options.costModel);
  return bruckAllgatherCost(blockBytes, options.costModel) < ring ? 'bruck' : 'ring';
}
