/**
 * Reduce to a root, choosing the algorithm by the cost model (cost_model.ts): the pipelined
 * binomial tree (⌈log2 N⌉ levels, the root taking in ⌈log2 N⌉·M; tree_reduce.ts) or
 * Rabenseifner's reduce-scatter + gather (2·log2 N steps, the root taking in 2(N-1)/N·M;
 * rabenseifner_reduce.ts), which wins for large buffers on many ranks. Below kCostChoiceMinRanks
 * ranks the tree always runs, as before; an algorithm forced in the options (RINGREDUCE_ALGORITHMS)
 * runs whatever the size. The choice depends only on the byte length, the rank
 * count, the root and the options, which every rank of a collective shares.
 */
import type { AlgorithmOf } from '../core/algorithm_names.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { kCostChoiceMinRanks, rabenseifnerReduceCost, treeReduceCost } from './cost_model.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { rabenseifnerReduce } from './rabenseifner_reduce.js';
import { treeReduce } from './tree_reduce.js';

export type ReduceAlgorithm = AlgorithmOf<'reduce'>;

/**
 * Reduces `buf` element-wise across all ranks into the root's `buf` (the contract of treeReduce:
 * `buf` is work space on the other ranks).
 *
 * @example
 *   await reduceToRoot(transport, metrics, 'sum', 0, tag, { pool });
 */
export function reduceToRoot(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  if (reduceAlgorithm(transport.size, buf.byteLength, root, resolveOptions(options)) === 'rabenseifner') {
    return rabenseifnerReduce(transport, buf, op, root, tag, options);
  }
  return treeReduce(transport, buf, op, root, tag, options);
}

/** What `reduceToRoot` runs for `bytes` on `ranks` ranks to `root` with these options. */
export function reduceAlgorithm(ranks: number, bytes: number, root: number, options: ResolvedOptions): ReduceAlgorithm {
  const forced = options.algorithms?.reduce;
  if (forced !== undefined) return forced;
  if (ranks < kCostChoiceMinRanks) return 'tree';
  const { segmentBytes, costModel } = options;
  const tree = treeReduceCost(ranks, bytes, segmentBytes, costModel);
  return rabenseifnerReduceCost(ranks, bytes, root, segmentBytes, costModel) < tree ? 'rabenseifner' : 'tree';
}
