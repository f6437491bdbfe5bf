/**
 * Ring allgather with per-rank block sizes (allgatherv).
 *
 * How it works: `out` holds every rank's block back to back, rank r's at
 * sum(counts[0..r)); each rank has already placed its own. In N - 1 steps, at step g rank r
 * sends block (r - g) mod N to its right neighbour and receives block (r - g - 1) mod N from its
 * left one, straight into `out` (no scratch). Each rank sends every block but its right
 * neighbour's once: sum(counts) - counts[r + 1] elements; each link carries them once. Blocks
 * are cut into segments that are forwarded as soon as they arrive (see ring_schedule.ts), so a
 * large block does not wait a whole step at every hop. Empty blocks send nothing.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { runRing } from './ring_schedule.js';
import { blocksFromCounts } from './segments.js';

/**
 * Fills `out` with the blocks of all ranks. counts[r] is the number of elements of rank r (0 is
 * allowed); the caller has copied its own block into place. Every rank passes the same counts,
 * tag and options.
 *
 * @example
 *   out.set(mine, offsetOfMyBlock);
 *   await ringAllgather(transport, out, [3, 0, 5], tag);
 */
export async function ringAllgather(
  transport: Transport,
  out: TypedArray,
  counts: readonly number[],
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const size = transport.size;
  if (counts.length !== size) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${size}), got ${counts.length}`);
  }
  const blocks = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== out.length) {
    throw new InvalidArgumentError(`out has ${out.length} elements but the counts add up to ${total}`);
  }
  const resolved = resolveOptions(options);
  if (size === 1 || total === 0) return;
  await runRing(transport, out, tag, { blocks, steps: size - 1, reduceSteps: 0 }, resolved);
}
