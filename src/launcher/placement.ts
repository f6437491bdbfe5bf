/**
 * Where each rank runs: ranks fill the hosts in the order given, host by host (rank 0..s0-1 on
 * the first host's s0 slots, and so on), as mpirun's default `--map-by slot`. Local rank and
 * size count the ranks of one host; cross rank and size count the hosts that got ranks.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { RankPlacement } from './env_contract.js';
import type { HostSlots } from './hosts.js';

export interface PlacedRank extends Omit<RankPlacement, 'address'> {
  host: string;
  /** Whether the host is this machine (the rank is spawned directly, not over ssh). */
  local: boolean;
}

export function placeRanks(np: number, hosts: readonly HostSlots[], isLocal: (host: string) => boolean): PlacedRank[] {
  const total = hosts.reduce((sum, h) => sum + h.slots, 0);
  if (np > total) {
    throw new InvalidArgumentError(
      `-np ${np} is more than the ${total} slots of the hosts (${hosts.map((h) => `${h.host}:${h.slots}`).join(',')})`,
    );
  }
  const used: { host: string; count: number }[] = [];
  let left = np;
  for (const { host, slots } of hosts) {
    if (left === 0) break;
    const count = Math.min(slots, left);
    used.push({ host, count });
    left -= count;
  }
  const placed: PlacedRank[] = [];
  used.forEach(({ host, count }, crossRank) => {
    const local = isLocal(host);
    for (let localRank = 0; localRank < count; localRank++) {
      placed.push({ rank: placed.length, localRank, localSize: count, crossRank, crossSize: used.length, host, local });
    }
  });
  return placed;
}
