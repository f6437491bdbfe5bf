/**
 * Which failed rank is the job's root cause. A rank whose peer fails dies too: its collectives
 * reject with a PeerFailureError naming that peer (docs/failures.md), and it may exit before the
 * peer's own process has (a rank that throws exits only once Node has printed the error and
 * stopped its threads; its peers see its connections close before that). So the first rank to
 * exit is not always the cause. Each failed rank's error says whom it blames (rank_error.ts):
 * - a rank that failed on its own (any error but a PeerFailureError naming another rank, a
 *   signal, an exit without an error printed) is the cause; the first such to exit wins;
 * - a rank that died of a peer's failure is never the cause when that peer failed too;
 * - while the blamed peer may still fail (it has not exited yet), the answer waits;
 * - when every failed rank blames another failed rank (a link cut between two ranks, each
 *   blaming the other), the first to exit is named.
 */
import type { RankError } from './rank_error.js';
import type { RankExit } from './rank_process.js';

/** A rank that failed, as ringrun reports it. */
export interface FailedRank {
  exit: RankExit;
  /** Its last lines of output, up to its error when it printed one (rank_error.ts). */
  lastLines: string[];
  /** The error it died of, when its output holds one. */
  error?: RankError;
  /** Said after how it ended: " before calling init()". */
  note?: string;
}

/** The rank a failed rank blames for its death, if it blames another one (a signal's death is its own). */
export function blamedPeer(failed: FailedRank): number | undefined {
  if (failed.exit.signal !== null) return undefined;
  const peer = failed.error?.peerRank;
  return peer !== undefined && peer !== failed.exit.rank ? peer : undefined;
}

/**
 * The cause among `failed` (in the order they exited), or undefined while it cannot be told:
 * `mayStillFail(rank)` says whether a blamed peer has not exited (nor been found stopped) yet.
 */
export function rootCause(failed: readonly FailedRank[], mayStillFail: (rank: number) => boolean): FailedRank | undefined {
  const own = failed.find((f) => blamedPeer(f) === undefined);
  if (own !== undefined) return own;
  const failedRanks = new Set(failed.map((f) => f.exit.rank));
  const blamingLive = failed.filter((f) => !failedRanks.has(blamedPeer(f) as number));
  if (blamingLive.some((f) => mayStillFail(blamedPeer(f) as number))) return undefined;
  return blamingLive[0] ?? failed[0];
}
