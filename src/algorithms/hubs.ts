/**
 * The hubs of a group that mixes ranks on fast links with ranks on slow ones, as the hub
 * collectives (hub_allreduce.ts) see them. A browser rank is a leaf: each of its links is a
 * WebSocket or a data channel through the browser's network stack, which carries a few tens of
 * MB/s where two Node ranks exchange hundreds. The other ranks are the hubs. Leaf i (in rank
 * order) hangs off hub i mod H, so the hubs share the leaves as evenly as they can.
 *
 * Only a group with at least one hub and one leaf has hubs; a group of Node ranks only, or of
 * browser ranks only, runs the flat algorithms. The layout depends only on which members are
 * leaves, which every rank derives from the same exchanged placements (engine/topology.ts), so
 * every rank of a collective sees the same stars.
 */
import { SubgroupTransport } from '../transport/subgroup_transport.js';
import type { Transport } from '../transport/transport.js';

/** The views a hub collective runs its phases over. */
export interface Hubs {
  /** This rank's star: its hub first (rank 0 of the view), then the hub's leaves in rank order. */
  readonly star: Transport;
  /** The hubs in rank order (one per star), on a hub; undefined on a leaf. */
  readonly hubs: Transport | undefined;
  /** Ranks in the group: an average's divisor. */
  readonly size: number;
}

/** The hubs of `transport`'s group, whose member r is a leaf when `leaf[r]`; undefined without both kinds. */
export function hubsOf(transport: Transport, leaf: readonly boolean[]): Hubs | undefined {
  if (leaf.length !== transport.size) throw new Error(`${leaf.length} leaf flags for a group of ${transport.size}`);
  const hubRanks: number[] = [];
  const leafRanks: number[] = [];
  for (const [rank, isLeaf] of leaf.entries()) (isLeaf ? leafRanks : hubRanks).push(rank);
  if (hubRanks.length === 0 || leafRanks.length === 0) return undefined;
  const hubOf = (leafIndex: number) => hubRanks[leafIndex % hubRanks.length] as number;
  const starOf = (hub: number) => [hub, ...leafRanks.filter((_, i) => hubOf(i) === hub)];
  const me = transport.rank;
  const leafIndex = leafRanks.indexOf(me);
  const isHub = leafIndex < 0;
  return {
    star: new SubgroupTransport(transport, starOf(isHub ? me : hubOf(leafIndex))),
    hubs: isHub ? new SubgroupTransport(transport, hubRanks) : undefined,
    size: transport.size,
  };
}
