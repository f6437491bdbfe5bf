/**
 * Ready rounds: how ranks agree on cached collectives without asking rank 0 (Horovod's
 * steady state, where cached responses are coordinated by one small bit-vector exchange).
 *
 * Every rank holds the same response cache (response_cache.ts), so a tensor that ran before
 * has the same id everywhere. Agreement then proceeds in numbered rounds:
 *
 * - A rank opens the current round when it has a ready cached id it has not yet reported, or
 *   when a peer's message for the round arrives: it contributes the bit-vector of all its
 *   ready ids and takes no part in a later round until this one closes.
 * - A rank closes the round once the exchange has combined every rank's contribution. The ids
 *   in all of them (the AND) are agreed: every rank computes the same set, and runs them in
 *   ascending id order, after everything agreed in earlier rounds.
 *
 * The exchange (RoundExchange) moves the contributions: all-to-all (ready_all_to_all.ts, every
 * rank sends every peer its bit-vector: N - 1 messages per rank, one one-way message deep) or
 * recursive doubling (ready_doubling.ts, an allreduce of the bit-vectors: about log2 N messages
 * per rank, log2 N deep). ready_exchange_mode.ts picks one by set size, the same on every rank.
 * The protocol here is the same for both; only rank 0 (whose coordinator names the ranks that
 * hold a stall up) needs every rank's own contribution, and both exchanges bring it there.
 *
 * Rounds are opened only by new readiness, never by a clock, so an idle job sends nothing, and a
 * rank waiting for a late peer sends nothing until the peer reports. The round in which the last
 * rank reports an id is one in which every other rank still holds it (ids leave a rank's ready
 * set only by running, which needs everyone), so each id is agreed in the first round after
 * the last rank has it ready: one one-way message on the critical path all-to-all (log2 N by
 * recursive doubling) instead of the request and response of a trip through rank 0. A rank is at most one round ahead of any peer (closing
 * a round needs everyone's contribution to it), so a report for any other round is a protocol
 * error.
 *
 * Holding back: a rank with nothing pending at all (its caller is still computing) does not
 * answer a round a peer opened, because the round could only close empty and the rank's next
 * submission would then need a round of its own; it answers with its first submission instead,
 * or when the engine's grace timer calls `answerNow` (so that rank 0 still learns what waits on
 * whom, for stall reports, and its decisions are not held up for long). A rank that hears of the
 * round from one that answered on its timer answers at once (RoundExchange.urgent): with
 * recursive doubling the ranks hear of a round one step after another, and each waiting a grace
 * period of its own would add them up.
 *
 * Blocking: an id whose collective failed or left the cache between two closes (rank 0's
 * responses run there, see engine.ts) may still appear in contributions to the open round;
 * `block` makes the next close ignore it on every rank, and lets a resubmission of it count as
 * new readiness again.
 */
import { ProtocolError } from '../../core/errors.js';

export interface ClosedRound {
  round: number;
  /** Ids every rank reported ready, ascending: run these. */
  agreed: readonly number[];
  /**
   * Ids some ranks but not all reported ready, with the ranks that did (for stall reports). Empty
   * on ranks whose exchange does not bring them every contribution (recursive doubling, rank > 0).
   */
  partial: ReadonlyMap<number, readonly number[]>;
}

/** What an exchange knows once a round is complete on this rank. */
export interface RoundOutcome {
  /** The AND of every rank's contribution, ascending. */
  agreed: readonly number[];
  /** Rank 0's decision messages this rank must have received before it closes the round (see ready_doubling.ts). */
  decisions?: number;
  /** Every rank's own contribution (ascending), by rank (this rank's included), where the exchange brought them here. */
  contributions?: ReadonlyMap<number, readonly number[]>;
}

/** How contributions travel between ranks for one set (ready_all_to_all.ts, ready_doubling.ts). */
export interface RoundExchange {
  /**
   * Sends this rank's contribution to round `round`: `ready` (ascending), or a prefix of it when
   * the message would be too large; returns the ids it reported. `urgent`: this rank answers on
   * its grace timer (see ReadyRounds.answerNow), so ranks it reaches need not wait theirs.
   */
  contribute(round: number, ready: readonly number[], urgent: boolean): readonly number[];
  /** Whether a peer's message for `round` has arrived (a peer opened it). */
  opened(round: number): boolean;
  /** Whether a message for `round` said that its sender's side answered on a grace timer. */
  urgent(round: number): boolean;
  /** The outcome of `round` once complete here (and forgets it), else undefined. */
  take(round: number): RoundOutcome | undefined;
}

/** Checks a peer's message is for the open round `open` or the next one (see the header). */
export function checkRound(peer: number, round: number, open: number): void {
  if (round !== open && round !== open + 1) {
    throw new ProtocolError(`rank ${peer} reported ready tensors for round ${round} while this rank is in round ${open}`);
  }
}

export class ReadyRounds {
  /** Rounds closed so far; the open round is number `closed`. */
  private closedCount = 0;
  private contributed = false;
  private readonly ready = new Set<number>();
  /** Ids this rank reported in its latest contribution that are still waiting. */
  private reported = new Set<number>();
  private readonly blocked = new Set<number>();
  private answerDue = false;
  /** The open round's outcome, held until rank 0's decisions it names have arrived. */
  private held: RoundOutcome | undefined;

  constructor(
    private readonly size: number,
    private readonly exchange: RoundExchange,
    /** Whether this rank has anything pending, so that it answers a peer's round at once. */
    private readonly busy: () => boolean = () => true,
    /** Rank 0's decision messages received so far (on rank 0: published). */
    private readonly decisionsReceived: () => number = () => Number.POSITIVE_INFINITY,
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
    return !this.contributed && this.exchange.opened(this.closedCount);
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

  /**
   * Contributes to the open round if there is a reason to, and closes it if the exchange is
   * complete. Returns the closed round, or undefined when nothing more can happen until a message
   * or a new ready id arrives. Call again after handling a closed round.
   */
  advance(): ClosedRound | undefined {
    const round = this.closedCount;
    if (!this.contributed) {
      const opened = this.exchange.opened(round);
      const urgent = opened && (this.answerDue || this.exchange.urgent(round));
      const answer = opened && (urgent || this.busy());
      if (!answer && !this.hasUnreported()) return undefined;
      this.contributed = true;
      this.answerDue = false;
      const ids = this.exchange.contribute(
        round,
        [...this.ready].sort((a, b) => a - b),
        urgent,
      );
      this.reported = new Set(ids);
    }
    const outcome = this.held ?? this.exchange.take(round);
    if (!outcome) return undefined;
    if ((outcome.decisions ?? 0) > this.decisionsReceived()) {
      this.held = outcome;
      return undefined;
    }
    this.held = undefined;
    return this.close(outcome);
  }

  private hasUnreported(): boolean {
    if (this.ready.size === this.reported.size) return false;
    for (const id of this.ready) if (!this.reported.has(id)) return true;
    return false;
  }

  private close(outcome: RoundOutcome): ClosedRound {
    const round = this.closedCount;
    const blocked = this.blocked;
    const agreed = blocked.size === 0 ? outcome.agreed : outcome.agreed.filter((id) => !blocked.has(id));
    // The steady state agrees on everything reported: no map unless some id is partial.
    let partial: Map<number, number[]> | undefined;
    if (outcome.contributions) {
      for (let rank = 0; rank < this.size; rank++) {
        // Both lists ascend: one walk finds the ids of this contribution that were not agreed.
        let j = 0;
        for (const id of outcome.contributions.get(rank) ?? []) {
          while (j < agreed.length && (agreed[j] as number) < id) j++;
          if (agreed[j] === id || blocked.has(id)) continue;
          partial ??= new Map();
          const ranks = partial.get(id);
          if (ranks) ranks.push(rank);
          else partial.set(id, [rank]);
        }
      }
    }
    for (const id of agreed) {
      this.ready.delete(id);
      this.reported.delete(id);
    }
    // A blocked id still ready was resubmitted: it must be reported again.
    for (const id of this.blocked) this.reported.delete(id);
    this.blocked.clear();
    this.contributed = false;
    this.closedCount++;
    return { round, agreed, partial: partial ?? kNonePartial };
  }
}

/** The partial ids of a round that had none. */
const kNonePartial: ReadonlyMap<number, readonly number[]> = new Map();

/** The ids in both ascending lists, ascending. */
export function intersect(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let j = 0;
  for (const id of a) {
    while (j < b.length && (b[j] as number) < id) j++;
    if (j < b.length && b[j] === id) out.push(id);
  }
  return out;
}
