/**
 * The engine's share-out of the transport's data tags. Collectives take the even tags (a counter
 * every rank advances in the agreed order, executor.ts); point-to-point messages take the odd ones
 * (a counter per ordered pair of ranks, point_to_point.ts). Neither can match the other's
 * messages, also on a backend that takes tags modulo a power of two (MPI's tag upper bound + 1 is
 * one: 2^31 in Open MPI, at least 2^15 by the standard).
 */

/** How many collective tags there are before the counter wraps (every rank wraps at the same call). */
export const kCollectiveTagCount = 2 ** 31;

export function collectiveTag(n: number): number {
  return 2 * (n % kCollectiveTagCount);
}

export function peerTag(sequence: number): number {
  return 2 * (sequence % 2 ** 31) + 1;
}
