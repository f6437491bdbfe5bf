/**
 * Allreduce, choosing the algorithm by size: recursive doubling (fewest steps) for buffers of at
 * most `latencyMaxBytes`, the pipelined ring (least bytes per rank) above. Every rank sees the
 * same length and options, so every rank picks the same algorithm.
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
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
  const { latencyMaxBytes } = resolveOptions(options);
  if (buf.byteLength <= latencyMaxBytes) return recursiveDoublingAllreduce(transport, buf, op, tag, options);
  return ringAllreduce(transport, buf, op, tag, options);
}
