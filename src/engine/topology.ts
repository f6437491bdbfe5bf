/**
 * Which host each rank of the job runs on, for the hierarchical collectives
 * (algorithms/hierarchy.ts) and the cross-host byte counters (counting_transport.ts); and which
 * ranks run in a browser, the leaves of the hub collectives (algorithms/hubs.ts).
 *
 * How it works: each rank knows only its own placement, from the launcher (local rank and size,
 * cross rank and size: core/config.ts). Before the engine runs anything, the ranks allgather them
 * (a ring of 28 bytes per rank) and every rank checks the same thing: the placements describe
 * hosts consistently (each cross rank names a host whose ranks number its local size, with local
 * ranks 0..L-1, and there are cross size hosts). Then a rank's host is its cross rank; otherwise
 * (a launcher that sets local values but no cross rank, say) no rank knows the hosts and every
 * collective runs flat. On a job on one host (local size = size) every rank knows that all share
 * its host, and none is a browser's (each tab is a host of its own: launcher/browser/browser_job.ts),
 * whatever the exchange says.
 *
 * The exchange also carries each rank's stamp of the settings every rank must share
 * (settings_agreement.ts), so that checking them costs no round of its own; that is why a job on
 * one host exchanges too (a ring of N - 1 steps of 28 bytes: 0.4 to 2 ms on 2 ranks of a loaded 2-core machine,
 * where init() takes 500 to 1000 ms).
 */
import { ringAllgather } from '../algorithms/ring_allgather.js';
import type { Config } from '../core/config.js';
import type { Transport } from '../transport/transport.js';
import type { SettingsStamp } from './settings_agreement.js';
import { kStartupTag } from './wire/tags.js';

export type Placement = Pick<Config, 'localRank' | 'localSize' | 'crossRank' | 'crossSize'>;

/** Local rank and size, cross rank and size, browser, then the settings' digest and length. */
const kFields = 7;

export interface Topology {
  /** The host of every rank; undefined where the placements do not describe hosts. */
  hosts: number[] | undefined;
  /** Whether each rank runs in a browser. */
  browsers: boolean[];
  /** Each rank's stamp of its agreed settings. */
  stamps: SettingsStamp[];
}

/**
 * Every rank's host, kind and settings stamp; every rank calls it at start-up (`browser`: this
 * rank runs in a browser; `stamp`: its own, settings_agreement.ts).
 */
export async function exchangeTopology(
  transport: Transport,
  config: Config,
  browser: boolean,
  stamp: SettingsStamp,
): Promise<Topology> {
  const { size, rank, localSize } = config;
  if (size === 1) return { hosts: [0], browsers: [browser], stamps: [stamp] };
  const all = new Int32Array(kFields * size);
  all.set(
    [config.localRank, config.localSize, config.crossRank, config.crossSize, browser ? 1 : 0, stamp.digest, stamp.bytes],
    kFields * rank,
  );
  await ringAllgather(transport, all, new Array<number>(size).fill(kFields), kStartupTag);
  const fields = (r: number) => all.subarray(kFields * r, kFields * (r + 1));
  const stamps = Array.from({ length: size }, (_, r) => ({ digest: fields(r)[5] as number, bytes: fields(r)[6] as number }));
  if (localSize === size) {
    return { hosts: new Array<number>(size).fill(0), browsers: new Array<boolean>(size).fill(false), stamps };
  }
  const placements = Array.from({ length: size }, (_, r) => {
    const [localRank, localSize, crossRank, crossSize] = fields(r);
    return { localRank, localSize, crossRank, crossSize } as Placement;
  });
  return { hosts: hostsOf(placements), browsers: Array.from({ length: size }, (_, r) => fields(r)[4] === 1), stamps };
}

/** Each rank's host (its cross rank) when the placements describe hosts consistently, else undefined. */
export function hostsOf(placements: readonly Placement[]): number[] | undefined {
  const crossSize = placements[0]?.crossSize ?? 0;
  const members = Array.from({ length: crossSize }, () => new Set<number>());
  for (const p of placements) {
    if (p.crossSize !== crossSize || !(p.crossRank >= 0 && p.crossRank < crossSize)) return undefined;
    const host = members[p.crossRank] as Set<number>;
    if (host.has(p.localRank)) return undefined;
    host.add(p.localRank);
  }
  for (const p of placements) {
    const host = members[p.crossRank] as Set<number>;
    if (p.localSize !== host.size || !(p.localRank >= 0 && p.localRank < p.localSize)) return undefined;
  }
  if (members.some((host) => host.size === 0)) return undefined;
  return placements.map((p) => p.crossRank);
}
