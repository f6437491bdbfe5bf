/**
 * Allreduce, choosing the algorithm by the cost model (cost_model.ts): recursive doubling (fewest
 * messages) when it is the cheaper for this size and rank count, the pipelined ring (least bytes
 * per rank) otherwise; the crossover grows with the rank count. A fixed `latencyMaxBytes`
 * replaces the model. The choice depends only on the byte length, the rank count and the
 * options, which every rank of a collective shares, so every rank picks the same algorithm.
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AllreduceAlgorithm, chooseAllreduce } from './cost_model.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
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
  const algorithm = allreduceAlgorithm(transport.size, buf.byteLength, resolveOptions(options));
  if (algorithm === 'recursive_doubling') return recursiveDoublingAllreduce(transport, buf, op, tag, options);
  return ringAllreduce(transport, buf, op, tag, options);
}

/** What `allreduce` runs for `bytes` on `ranks` ranks with these options. */
export function allreduceAlgorithm(ranks: number, bytes: number, options: ResolvedOptions): AllreduceAlgorithm {
  const { latencyMaxBytes, segmentBytes, costModel } = options;
  if (latencyMaxBytes !== undefined) return bytes <= latencyMaxBytes ? 'recursive_doubling' : 'ring';
  return chooseAllreduce(ranks, bytes, segmentBytes, costModel);
}
