/**
 * Hierarchical allreduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE), for H hosts of L ranks
 * (hierarchy.ts).
 *
 * How it works: the buffer is cut into L chunks, as even as possible (segments.ts). 1. Ring
 * reduce-scatter among the L ranks of each host: local rank j ends with chunk j reduced over its
 * host. 2. Allreduce of chunk j among the H ranks with local rank j, one per host (allreduce.ts
 * picks recursive doubling or the ring for its length): every rank now holds its chunk reduced
 * over the job. 3. Ring allgather among the L ranks of each host: every rank gets every chunk.
 * 'average' runs as a sum whose chunk each rank divides by N = L·H between 2 and 3, so all ranks
 * hold the same bits.
 *
 * Cost: 2(L-1) local steps moving 2(L-1)/L·M per rank, and the cross-host allreduce of M/L: with
 * the ring, 2(H-1) steps moving 2(H-1)/H·M/L per rank. A flat ring over host-major ranks crosses
 * hosts on one link per host, whose rank sends 2(N-1)/N·M to the next host; here every rank
 * sends its 1/L share, so the busiest rank's cross-host bytes drop by about L (exactly
 * L·H(N-1)/(N(H-1))), while a host's total drops only from 2(N-1)/N·M to 2(H-1)/H·M: the gain
 * is L parallel cross-host streams of 1/L each instead of one stream carrying it all, and 2(H-1)
 * slow steps instead of 2(N-1).
 *
 * Tags: the three phases share the collective's tag. Phase 2 talks only to other hosts and
 * phases 1 and 3 only to this host, so only 1 and 3 share peers; each rank posts every send and
 * receive of phase 1 before any of phase 3, and the transport matches first-in first-out per
 * (peer, tag), so phase 3's messages never meet phase 1's receives (recursive doubling relies on
 * the same order for its rounds).
 */
import type { HierarchicalMode, ReduceOp, TypedArray } from '../core/types.js';
import { allreduce, allreduceAlgorithm } from './allreduce.js';
import type { Hierarchy } from './hierarchy.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { divideInPlace, elementwiseOf, reduceDType } from './reduce.js';
import { ringAllgather } from './ring_allgather.js';
import { ringReducescatter } from './ring_reducescatter.js';
import { evenBlocks } from './segments.js';

/**
 * Reduces `buf` element-wise across all ranks of the hierarchy, in place. Every rank passes the
 * same length, dtype, op, tag and options.
 *
 * @example
 *   const hierarchy = hierarchyOf(transport, uniformHostLayout(hosts));
 *   await hierarchicalAllreduce(hierarchy, gradients, 'average', tag, { pool });
 */
export async function hierarchicalAllreduce(
  hierarchy: Hierarchy,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  reduceDType(buf, op);
  const { local, cross } = hierarchy;
  const { offsets, lengths } = evenBlocks(buf.length, local.size);
  const offset = offsets[local.rank] as number;
  const chunk = buf.subarray(offset, offset + (lengths[local.rank] as number));
  const sum = elementwiseOf(op);
  await ringReducescatter(local, buf, lengths, sum, tag, options);
  await allreduce(cross, chunk, sum, tag, options);
  if (op === 'average') divideInPlace(chunk as Float32Array | Float64Array, local.size * cross.size);
  await ringAllgather(local, buf, lengths, tag, options);
}

/**
 * Whether an allreduce of `bytes` runs hierarchically in `mode` (`hierarchy` is undefined where
 * the layout does not allow it): 'auto' where the flat allreduce would run the ring or Rabenseifner's, the
 * bandwidth-bound sizes where cutting the cross-host bytes pays; below that, recursive doubling's
 * few steps beat the 2(L-1) local ones added here. Under a forced allreduce (options.algorithms)
 * 'auto' runs flat, the forced algorithm as asked; 'on' runs this, the forced one across hosts.
 */
export function allreduceRunsHierarchically(
  mode: HierarchicalMode,
  hierarchy: Hierarchy | undefined,
  bytes: number,
  options?: AlgorithmOptions,
): hierarchy is Hierarchy {
  if (hierarchy === undefined || mode === 'off') return false;
  if (mode === 'on') return true;
  if (options?.algorithms?.allreduce !== undefined) return false;
  const ranks = hierarchy.local.size * hierarchy.cross.size;
  return allreduceAlgorithm(ranks, bytes, resolveOptions(options)) !== 'recursive_doubling';
}
