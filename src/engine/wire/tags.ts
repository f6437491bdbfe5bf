/**
 * The engine's share-out of the transport's data tags. Collectives take the even tags, point-to-point
 * messages the odd ones (a counter per ordered pair of ranks, point_to_point.ts). Among the even
 * ones, each process set has its own residue class: collective n of set s has tag
 * 2 · ((n · kMaxProcessSets + s) mod 2^31), from a counter every member of the set advances in the
 * agreed order (executor.ts). So no message can land in a receive of another set's collective or
 * of a send/recv, also on a backend that takes tags modulo a power of two (MPI's tag upper bound
 * + 1 is one: 2^31 in Open MPI, at least 2^15 by the standard).
 */

/** Process set ids are below this (0 is the world). */
export const kMaxProcessSets = 1024;

/** How many collectives of one set before its counter wraps (every member wraps at the same call). */
export const kCollectiveTagCount = 2 ** 31 / kMaxProcessSets;

export function collectiveTag(set: number, n: number): number {
  return 2 * (((n % kCollectiveTagCount) * kMaxProcessSets + set) % 2 ** 31);
}

export function peerTag(sequence: number): number {
  return 2 * (sequence % 2 ** 31) + 1;
}

/**
 * The start-up exchange of placements (topology.ts) runs before any collective, on the world's
 * last tag before its counter wraps: a tag no collective uses until 2^21 world collectives later,
 * and by then the exchange's messages are long matched (first-in first-out per peer and tag).
 */
export const kStartupTag = collectiveTag(0, kCollectiveTagCount - 1);

/** The start-up measurement of the cost model (cost_probe.ts), on the tag before kStartupTag's, for the same reason. */
export const kCostProbeTag = collectiveTag(0, kCollectiveTagCount - 2);
