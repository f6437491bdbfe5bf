/**
 * Ring reduce-scatter with per-rank block sizes: the first half of ring_allreduce.ts.
 *
 * How it works: `buf` holds one block per rank. runRing's N - 1 reduce steps leave rank r with
 * ring block (r + 1) mod N fully reduced, so the ring's blocks are the data blocks rotated by one
 * (ring block b is data block (b - 1) mod N) and rank r ends up owning its own data block r. Each
 * step sends one block to the right neighbour and reduces the block arriving from the left into
 * place, segments pipelined across steps with receive scratch from the pool (ring_schedule.ts).
 * 'average' is a sum whose owned block each rank divides by N once it is fully reduced.
 *
 * Cost: N - 1 steps. Rank r sends every block but its own once, sum(counts) - counts[r] elements,
 * and receives every block but its left neighbour's: (N - 1)/N of the buffer for even counts,
 * half of what an allreduce of the same buffer sends, and optimal in bandwidth.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { runRing } from './ring_schedule.js';
import { blocksFromCounts } from './segments.js';

/**
 * Reduces block r of `buf` (counts[r] elements, blocks back to back in rank order) across all
 * ranks into rank r's block r. The rest of `buf` is work space and holds partial results
 * afterwards. Every rank passes the same counts, dtype, op, tag and options. 'average' is for
 * float dtypes only, 'band', 'bor' and 'bxor' for integer ones only.
 *
 * @example
 *   await ringReducescatter(transport, gradients, [4, 4, 3], 'average', tag, { pool });
 *   const mine = gradients.subarray(offsetOfMyBlock, offsetOfMyBlock + 4);
 */
export async function ringReducescatter(
  transport: Transport,
  buf: TypedArray,
  counts: readonly number[],
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const size = transport.size;
  if (counts.length !== size) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${size}), got ${counts.length}`);
  }
  const data = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== buf.length) {
    throw new InvalidArgumentError(`buf has ${buf.length} elements but the counts add up to ${total}`);
  }
  const resolved = resolveOptions(options);
  if (size === 1 || total === 0) return;
  const rotate = (b: number) => (b - 1 + size) % size;
  const blocks = {
    offsets: data.offsets.map((_, b) => data.offsets[rotate(b)]),
    lengths: data.lengths.map((_, b) => data.lengths[rotate(b)]),
  };
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  // The last reduce step's block is this rank's own: runRing finishes its segments only.
  const finish = finishOf(op, size);
  await runRing(transport, buf, tag, { blocks, steps: size - 1, reduceSteps: size - 1, kernel, finish }, resolved);
}
