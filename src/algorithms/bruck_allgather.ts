/**
 * Allgather in ⌈log2 N⌉ steps for any N (Bruck et al. 1997, the "dissemination" allgather), with
 * per-rank block sizes (allgatherv): the latency-optimal allgather, and for a power of two the
 * same messages and bytes as recursive doubling.
 *
 * How it works: `out` holds every rank's block back to back in rank order, this rank's own already
 * in place. Before the step of distance d (1, 2, 4, ...) rank r holds the d blocks r .. r+d-1
 * (mod N). It sends the first c = min(d, N - d) of them to rank r - d and receives blocks
 * r+d .. r+d+c-1 from rank r + d, which holds exactly those, so that it then holds 2d (or all N)
 * blocks. The blocks land in place: a run of blocks that wraps past rank N-1 travels as two
 * ranges, and no rank ever rotates its buffer (Bruck's original final shift is not needed). Each
 * step is pipelined in segments (exchange_step.ts).
 *
 * Why not recursive doubling with a fold for N that is not a power of two: the fold costs two
 * more steps and the whole buffer once more on the folded ranks; Bruck needs neither, and for a
 * power of two it sends the same bytes in the same number of steps.
 *
 * Cost, with blocks of b_r bytes: step d takes α plus the largest run of c blocks any rank sends,
 * times β; with even blocks, ⌈log2 N⌉·α + (N-1)/N·M·β for M = Σ b_r, against the ring's
 * (N-1)·α + (N-1)/N·M·β. A very uneven split (one large block) costs Bruck up to ⌈log2 N⌉·b_max·β,
 * since the large block travels at every step: the cost model (cost_model.ts) counts the runs.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { cyclicRanges, StepRunner } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { blocksFromCounts } from './segments.js';

/**
 * Fills `out` with the blocks of all ranks. counts[r] is the number of elements of rank r (0 is
 * allowed); the caller has copied its own block into place. Every rank passes the same counts,
 * tag and options.
 *
 * @example
 *   out.set(mine, offsetOfMyBlock);
 *   await bruckAllgather(transport, out, [3, 0, 5], tag);
 */
export async function bruckAllgather(
  transport: Transport,
  out: TypedArray,
  counts: readonly number[],
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  if (counts.length !== size) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${size}), got ${counts.length}`);
  }
  const { offsets, lengths } = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== out.length) {
    throw new InvalidArgumentError(`out has ${out.length} elements but the counts add up to ${total}`);
  }
  const resolved = resolveOptions(options);
  if (size === 1 || total === 0) return;
  const runner = new StepRunner(transport, out, tag, resolved, 0);
  for (let d = 1; d < size; d *= 2) {
    const c = Math.min(d, size - d);
    await runner.run({
      to: (rank - d + size) % size,
      sends: cyclicRanges(offsets, lengths, rank, c),
      from: (rank + d) % size,
      recvs: cyclicRanges(offsets, lengths, rank + d, c),
    });
  }
}
