/**
 * Ring allreduce (Patarasuk and Yuan; the algorithm of Baidu's ring and Horovod).
 *
 * How it works: the buffer is cut into N chunks. Reduce-scatter: in N - 1 steps each rank
 * sends one chunk to its right neighbour and reduces the chunk arriving from its left one into
 * place, so that after step N - 2 rank r holds chunk (r + 1) mod N fully reduced. Allgather: in
 * N - 1 more steps the reduced chunks travel once around the ring, landing in place. That is
 * 2(N - 1) steps; each rank sends and receives 2(N - 1)/N of the buffer, which is optimal in
 * bandwidth and independent of N for large N. Chunks are cut into segments that flow as one
 * pipeline through all steps (see ring_schedule.ts), with receive scratch from the pool.
 *
 * 'average' is a sum whose owned chunk each rank divides by N before the allgather, so every
 * rank divides 1/N of the data and all ranks end up with the same bits.
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { runRing } from './ring_schedule.js';
import { evenBlocks } from './segments.js';

/**
 * Reduces `buf` element-wise across all ranks, in place. Every rank passes the same length,
 * dtype, op, tag and options. 'average' is for float dtypes only, 'band', 'bor' and 'bxor' for
 * integer ones only.
 *
 * @example
 *   await ringAllreduce(transport, gradients, 'average', tag, { pool });
 */
export async function ringAllreduce(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const resolved = resolveOptions(options);
  const size = transport.size;
  if (size === 1 || buf.length === 0) return;
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  const finish = finishOf(op, size);
  const spec = { blocks: evenBlocks(buf.length, size), steps: 2 * (size - 1), reduceSteps: size - 1, kernel, finish };
  await runRing(transport, buf, tag, spec, resolved);
}
