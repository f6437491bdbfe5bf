/**
 * Ready rounds: how ranks agree on cached collectives without asking rank 0 (Horovod's
 * steady state, where cached responses are coordinated by one small bit-vector exchange).
 *
 * Every rank holds the same response cache (response_cache.ts), so a tensor that ran before
 * has the same id everywhere. Agreement then proceeds in numbered rounds:
 *
 * - A rank opens the current round when it has a ready cached id it has not yet reported, or
 *   when a peer's report for the round arrives: it sends every peer the bit-vector of all its
 *   ready ids (its contribution) and takes no part in a later round until this one closes.
 * - A rank closes the round once it holds every rank's contribution. The ids in all of them
 *   (the AND) are agreed: every rank computes the same set, and runs them in ascending id
 *   order, after everything agreed in earlier rounds.
 *
 * Rounds are opened only by new readiness, never by a clock, so an idle job sends nothing, and a
 * rank waiting for a late peer sends nothing until the peer reports. The round in which the last
 * rank reports an id is one in which every other rank still holds it (ids leave a rank's ready
 * set only by running, which needs everyone), so each id is agreed in the first round after
 * the last rank has it ready: one one-way message on the critical path instead of the request
 * and response of a trip through rank 0. A rank is at most one round ahead of any peer (closing
 * a round needs everyone's contribution to it), so a report for any other round is a protocol
 * error.
 *
 * Holding back: a rank with nothing pending at all (its caller is still computing) does not
 * answer a round a peer opened, because the round could only close empty and the rank's next
 * submission would then need a round of its own; it answers with its first submission instead,
 * or when the engine's grace timer calls `answerNow` (so that rank 0 still learns what waits on
 * whom, for stall reports, and its decisions are not held up for long).
 *
 * Blocking: an id whose collective failed or left the cache between two closes (rank 0's
 * responses run there, see engine.ts) may still appear in contributions to the open round;
 * `block` makes the next close ignore it on every rank, and lets a resubmission of it count as
 * new readiness again.
 */
import { ProtocolError } from '../core/errors.js';

export interface ClosedRound {
  round: number;
  /** Ids every rank reported ready, ascending: run these. */
  agreed: number[];
  /** Ids some ranks but not all reported ready, with the ranks that did (for stall reports). */
  partial: Map<number, number[]>;
}

export class ReadyRounds {
  /** Rounds closed so far; the open round is number `closed`. */
  private closedCount = 0;
  private contributed = false;
  private readonly ready = new Set<number>();
  /** Ids this rank reported in its latest contribution that are still waiting. */
  private reported = new Set<number>();
  private own: number[] = [];
  /** Peers' contributions by round (the open one and, from peers ahead, the next). */
  private readonly received = new Map<number, Map<number, readonly number[]>>();
  private readonly blocked = new Set<number>();
  private answerDue = false;

  constructor(
    private readonly rank: number,
    private readonly size: number,
    /**
     * Sends this rank's contribution to round `round` to every peer: `ready` (ascending), or a
     * prefix of it when the message would be too large; returns the ids it reported.
     */
    private readonly send: (round: number, ready: readonly number[]) => readonly number[],
    /** Whether this rank has anything pending, so that it answers a peer's round at once. */
    private readonly busy: () => boolean = () => true,
  ) {}

  /** Rounds closed so far. */
  get closed(): number {
    return this.closedCount;
  }

  /** Whether this rank has sent its contribution to the open round. */
  get contributedToOpenRound(): boolean {
    return this.contributed;
  }

  /** A peer opened the open round and this rank, having nothing pending, holds its answer back. */
  get holdingAnswer(): boolean {
    return !this.contributed && this.peerOpened();
  }

  /** Makes the next `advance` answer the open round even with nothing pending. */
  answerNow(): void {
    this.answerDue = true;
  }

  add(id: number): void {
    this.ready.add(id);
  }

  has(id: number): boolean {
    return this.ready.has(id);
  }

  /** The ids ready on this rank. */
  readyIds(): number[] {
    return [...this.ready];
  }

  /** Withdraws `id` (its collective failed or left the cache); see `block`. */
  remove(id: number): void {
    this.ready.delete(id);
  }

  /** The open round's close ignores `id`, whatever the contributions say (see the header). */
  block(id: number): void {
    this.blocked.add(id);
    this.reported.delete(id);
  }

  /** Forgets every ready id (the rank failed or is shutting down); it still answers rounds. */
  clear(): void {
    this.ready.clear();
    this.reported.clear();
  }

  /** A peer's contribution. Throws ProtocolError for a round it cannot be in. */
  onContribution(peer: number, round: number, ids: readonly number[]): void {
    if (round !== this.closedCount && round !== this.closedCount + 1) {
      throw new ProtocolError(
        `rank ${peer} reported ready tensors for round ${round} while this rank is in round ${this.closedCount}`,
      );
    }
    let byPeer = this.received.get(round);
    if (!byPeer) {
      byPeer = new Map();
      this.received.set(round, byPeer);
    }
    if (byPeer.has(peer)) throw new ProtocolError(`rank ${peer} reported ready tensors twice for round ${round}`);
    byPeer.set(peer, ids);
  }

  /**
   * Contributes to the open round if there is a reason to, and closes it if every contribution
   * is in. Returns the closed round, or undefined when nothing more can happen until a message
   * or a new ready id arrives. Call again after handling a closed round.
   */
  advance(): ClosedRound | undefined {
    if (!this.contributed) {
      const answer = this.peerOpened() && (this.answerDue || this.busy());
      if (!answer && !this.hasUnreported()) return undefined;
      this.contribute();
    }
    if ((this.received.get(this.closedCount)?.size ?? 0) < this.size - 1) return undefined;
    return this.close();
  }

  private peerOpened(): boolean {
    return (this.received.get(this.closedCount)?.size ?? 0) > 0;
  }

  private hasUnreported(): boolean {
    if (this.ready.size === this.reported.size) return false;
    for (const id of this.ready) if (!this.reported.has(id)) return true;
    return false;
  }

  private contribute(): void {
    this.contributed = true;
    this.answerDue = false;
    this.own = [
      ...this.send(
        this.closedCount,
        [...this.ready].sort((a, b) => a - b),
      ),
    ];
    this.reported = new Set(this.own);
  }

  private close(): ClosedRound {
    const round = this.closedCount;
    const byPeer = this.received.get(round) as Map<number, readonly number[]>;
    this.received.delete(round);
    const holders = new Map<number, number[]>();
    const note = (rank: number, ids: readonly number[]) => {
      for (const id of ids) {
        if (this.blocked.has(id)) continue;
        const ranks = holders.get(id);
        if (ranks) ranks.push(rank);
        else holders.set(id, [rank]);
      }
    };
    for (let rank = 0; rank < this.size; rank++) note(rank, rank === this.rank ? this.own : (byPeer.get(rank) ?? []));
    const agreed: number[] = [];
    const partial = new Map<number, number[]>();
    for (const [id, ranks] of holders) {
      if (ranks.length === this.size) agreed.push(id);
      else partial.set(id, ranks);
    }
    agreed.sort((a, b) => a - b);
    for (const id of agreed) {
      this.ready.delete(id);
      this.reported.delete(id);
    }
    // A blocked id still ready was resubmitted: it must be reported again.
    for (const id of this.blocked) this.reported.delete(id);
    this.blocked.clear();
    this.own = [];
    this.contributed = false;
    this.closedCount++;
    return { round, agreed, partial };
  }
}
