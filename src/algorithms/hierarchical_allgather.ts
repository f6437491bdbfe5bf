/**
 * Hierarchical allgather (Horovod's HOROVOD_HIERARCHICAL_ALLGATHER), for H hosts of L ranks in
 * host-major order (hierarchy.ts), with per-rank block sizes.
 *
 * How it works: 1. Ring allgather among the H ranks with local rank j, one per host, of their own
 * blocks: rank (h, j) now holds block (h', j) of every host h', each straight in its place in
 * `out`. Meanwhile, over the other links, a ring allgather among this host's L ranks completes
 * this host's region of `out` (its blocks are contiguous: ranks are host-major). 2. For every
 * other host, in host order, a ring allgather among this host's L ranks completes that host's
 * region: local rank j brings block (h, j), which it received in 1.
 *
 * Why this design and not Horovod's gather to a leader per host: a leader would send and receive
 * all of its host's data across hosts, (N-L)·b for blocks of b, no less than the busiest rank of
 * a flat ring ((N-1)·b). Here every local rank carries its own share: (H-1)·b across hosts per
 * rank, (N-1)/(H-1) ≥ L times less than the flat ring's busiest rank, and the host's total, (N-L)·b,
 * is what any allgather must bring into a host. Locally each rank sends (L-1)·b per host region,
 * H·(L-1)·b in all, and the H local rings add H·(L-1) fast steps to the H-1 slow ones (a flat
 * ring has N-1 steps, every one as slow as its cross-host link).
 *
 * Tags: all phases share the collective's tag. The cross ring talks only to other hosts, the
 * local rings only to this host; the local rings run one after another in the same order on
 * every rank of the host, and the transport matches first-in first-out per (peer, tag), so each
 * ring's messages meet that ring's receives.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { HierarchicalMode, TypedArray } from '../core/types.js';
import type { Hierarchy } from './hierarchy.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { ringAllgather } from './ring_allgather.js';
import { runRing } from './ring_schedule.js';
import { blocksFromCounts } from './segments.js';

/**
 * Fills `out` with the blocks of all ranks of the hierarchy (counts[r] elements of rank r, back
 * to back in rank order); the caller has copied its own block into place. Every rank passes the
 * same counts, tag and options.
 *
 * @example
 *   out.set(mine, offsetOfMyBlock);
 *   await hierarchicalAllgather(hierarchy, out, [3, 0, 5, 2], tag);
 */
export async function hierarchicalAllgather(
  hierarchy: Hierarchy,
  out: TypedArray,
  counts: readonly number[],
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { local, cross } = hierarchy;
  const l = local.size;
  const h = cross.size;
  if (counts.length !== l * h) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${l * h}), got ${counts.length}`);
  }
  const { offsets } = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== out.length) {
    throw new InvalidArgumentError(`out has ${out.length} elements but the counts add up to ${total}`);
  }
  const resolved = resolveOptions(options);
  if (total === 0) return;
  const hostRing = (host: number) => {
    const start = offsets[host * l] as number;
    const hostCounts = counts.slice(host * l, (host + 1) * l);
    const length = hostCounts.reduce((a, b) => a + b, 0);
    return ringAllgather(local, out.subarray(start, start + length), hostCounts, tag, options);
  };
  const ranksOfMyColumn = Array.from({ length: h }, (_, host) => host * l + local.rank);
  const blocks = {
    offsets: ranksOfMyColumn.map((r) => offsets[r] as number),
    lengths: ranksOfMyColumn.map((r) => counts[r] as number),
  };
  await settleAll([runRing(cross, out, tag, { blocks, steps: h - 1, reduceSteps: 0 }, resolved), hostRing(cross.rank)]);
  for (let host = 0; host < h; host++) if (host !== cross.rank) await hostRing(host);
}

/** Waits for every one (none is left writing into `out`), then rejects with the first failure. */
async function settleAll(runs: readonly Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(runs);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/**
 * Whether an allgather runs hierarchically in `mode` (`hierarchy` undefined: the layout does not
 * allow it). 'auto' always does: each rank sends (N-1)·b in all, as in the flat ring, in no more
 * steps, and only H-1 of them cross hosts instead of all N-1. Except under a forced allgather
 * (options.algorithms): 'auto' then leaves it to run flat, as asked; 'on' still runs this.
 */
export function allgatherRunsHierarchically(
  mode: HierarchicalMode,
  hierarchy: Hierarchy | undefined,
  options?: AlgorithmOptions,
): hierarchy is Hierarchy {
  if (hierarchy === undefined || mode === 'off') return false;
  return mode === 'on' || options?.algorithms?.allgather === undefined;
}
