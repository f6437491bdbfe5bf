/**
 * The hosts of a group of ranks, as the hierarchical collectives (hierarchical_allreduce.ts,
 * hierarchical_allgather.ts) see them: a local view of the ranks on this rank's host and a cross
 * view of the ranks with this rank's local rank on every host.
 *
 * Only a uniform, host-major layout qualifies: every host holds the same number L > 1 of
 * consecutive ranks (rank = host · L + local rank, as ringrun, Slurm's block distribution and
 * torchrun place them) and there are H > 1 hosts. Anything else (hosts of different sizes, ranks
 * interleaved across hosts, one host, one rank per host) runs the flat algorithms.
 *
 * Whether to run hierarchically depends only on the layout (which every rank derives from the
 * same exchanged placements), the mode (configuration) and the byte length (agreed), so every
 * rank of a collective makes the same choice.
 */
import { SubgroupTransport } from '../transport/subgroup_transport.js';
import type { Transport } from '../transport/transport.js';

export interface HostLayout {
  /** Ranks per host (L). */
  readonly localSize: number;
  /** Hosts (H). */
  readonly crossSize: number;
}

/** The two views a hierarchical collective runs its phases over. */
export interface Hierarchy {
  /** The L ranks of this rank's host, in rank order (local rank = rank in this view). */
  readonly local: Transport;
  /** The H ranks with this rank's local rank, one per host, in host order (cross rank = rank in this view). */
  readonly cross: Transport;
}

/**
 * The layout of a group whose rank r runs on host `hosts[r]` (any host ids), or undefined when it
 * is not uniform and host-major with L > 1 and H > 1.
 */
export function uniformHostLayout(hosts: readonly number[]): HostLayout | undefined {
  const first = hosts[0];
  let localSize = 0;
  while (localSize < hosts.length && hosts[localSize] === first) localSize++;
  const crossSize = hosts.length / localSize;
  if (localSize < 2 || !Number.isInteger(crossSize) || crossSize < 2) return undefined;
  const seen = new Set<number | undefined>();
  for (let start = 0; start < hosts.length; start += localSize) {
    const host = hosts[start];
    if (seen.has(host)) return undefined;
    seen.add(host);
    for (let i = start + 1; i < start + localSize; i++) if (hosts[i] !== host) return undefined;
  }
  return { localSize, crossSize };
}

/** The local and cross views of `transport` (a group laid out as `layout`). */
export function hierarchyOf(transport: Transport, layout: HostLayout): Hierarchy {
  const { localSize: l, crossSize: h } = layout;
  if (transport.size !== l * h) throw new Error(`a layout of ${h} hosts × ${l} ranks does not fit ${transport.size} ranks`);
  const host = Math.floor(transport.rank / l);
  const localRank = transport.rank % l;
  return {
    local: new SubgroupTransport(
      transport,
      Array.from({ length: l }, (_, i) => host * l + i),
    ),
    cross: new SubgroupTransport(
      transport,
      Array.from({ length: h }, (_, i) => i * l + localRank),
    ),
  };
}
