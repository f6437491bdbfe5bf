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
 * With `out`, the owned block's last step receives straight into `out` and reduces the local
 * block into it there (ring_schedule.ts), so the result never passes through `buf`: no copy out
 * of it afterwards, and no scratch at all on 2 ranks.
 *
 * Cost: N - 1 steps. Rank r sends every block but its own once, sum(counts) - counts[r] elements,
 * and receives every block but its left neighbour's: (N - 1)/N of the buffer for even counts,
 * half of what an allreduce of the same buffer sends, and optimal in bandwidth.
 */
import { dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { runRing } from './ring_schedule.js';
import { blocksFromCounts } from './segments.js';

/**
 * Reduces block r of `buf` (counts[r] elements, blocks back to back in rank order) across all
 * ranks into rank r's block r, or into `out` when given: an array of `buf`'s dtype and counts[r]
 * elements that does not overlap `buf`, all of which is written. The rest of `buf` (all of it,
 * with `out`) is work space: what it holds afterwards is unspecified. Every rank passes the same
 * counts, dtype, op, tag and options; `out` is each rank's own choice. 'average' is for float
 * dtypes only, 'band', 'bor' and 'bxor' for integer ones only.
 *
 * @example
 *   await ringReducescatter(transport, gradients, [4, 4, 3], 'average', tag, { pool });
 *   const mine = gradients.subarray(offsetOfMyBlock, offsetOfMyBlock + 4);
 *   // Or straight into an array of its own (counts[rank] elements), with no copy out of `buf`:
 *   await ringReducescatter(transport, gradients, [4, 4, 3], 'average', tag, { pool }, myRows);
 */
export async function ringReducescatter(
  transport: Transport,
  buf: TypedArray,
  counts: readonly number[],
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
  out?: TypedArray,
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
  const rank = transport.rank;
  if (out) checkReducescatterOut(buf, out, counts[rank] as number);
  const resolved = resolveOptions(options);
  if (total === 0) return;
  if (size === 1) {
    if (out) out.set(buf as never);
    return;
  }
  const rotate = (b: number) => (b - 1 + size) % size;
  const blocks = {
    offsets: data.offsets.map((_, b) => data.offsets[rotate(b)]),
    lengths: data.lengths.map((_, b) => data.lengths[rotate(b)]),
  };
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  // The last reduce step's block is this rank's own: runRing finishes its segments only.
  const finish = finishOf(op, size);
  const spec = { blocks, steps: size - 1, reduceSteps: size - 1, kernel, finish, out };
  await runRing(transport, buf, tag, spec, resolved);
}

/** `out` must be able to take this rank's block without touching `buf`. */
export function checkReducescatterOut(buf: TypedArray, out: TypedArray, count: number): void {
  if (dtypeOf(out) !== dtypeOf(buf)) throw new InvalidArgumentError(`out must be a ${dtypeOf(buf)} array like buf`);
  if (out.length !== count) throw new InvalidArgumentError(`out has ${out.length} elements but counts[rank] is ${count}`);
  const overlaps = out.byteOffset < buf.byteOffset + buf.byteLength && buf.byteOffset < out.byteOffset + out.byteLength;
  if (count > 0 && out.buffer === buf.buffer && overlaps) throw new InvalidArgumentError('out must not overlap buf');
}
