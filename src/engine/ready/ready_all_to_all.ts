/**
 * The all-to-all exchange of ready rounds (ready_rounds.ts): a rank sends its contribution to
 * every peer, and a round is complete on a rank once it holds every peer's. N - 1 messages per
 * rank and round, N(N - 1) in all, but only one one-way message on the critical path: the
 * fastest agreement for small sets (ready_exchange_mode.ts says up to which size). Every rank
 * ends with every rank's contribution, so every rank can name the holders of a partial id.
 */
import { ProtocolError } from '../../core/errors.js';
import { checkRound, intersect, type RoundExchange, type RoundOutcome } from './ready_rounds.js';

export class AllToAllExchange implements RoundExchange {
  /** Peers' contributions by round (the open one and, from peers ahead, the next). */
  private readonly received = new Map<number, Map<number, readonly number[]>>();
  private own: readonly number[] = [];

  constructor(
    private readonly rank: number,
    private readonly size: number,
    /** Sends `ready` (or a prefix, when too large) to every peer for `round`; returns the ids sent. */
    private readonly send: (round: number, ready: readonly number[]) => readonly number[],
  ) {}

  /** A peer's contribution; `open` is the receiver's open round. Throws ProtocolError for a round it cannot be in. */
  receive(peer: number, round: number, ids: readonly number[], open: number): void {
    checkRound(peer, round, open);
    let byPeer = this.received.get(round);
    if (!byPeer) {
      byPeer = new Map();
      this.received.set(round, byPeer);
    }
    if (byPeer.has(peer)) throw new ProtocolError(`rank ${peer} reported ready tensors twice for round ${round}`);
    byPeer.set(peer, ids);
  }

  contribute(round: number, ready: readonly number[]): readonly number[] {
    this.own = this.send(round, ready);
    return this.own;
  }

  opened(round: number): boolean {
    return (this.received.get(round)?.size ?? 0) > 0;
  }

  urgent(): boolean {
    // Every peer hears the opening directly: nobody waits on another's grace timer.
    return false;
  }

  take(round: number): RoundOutcome | undefined {
    const byPeer = this.received.get(round);
    if ((byPeer?.size ?? 0) < this.size - 1) return undefined;
    // Every peer's contribution is here: the round's map becomes the outcome's.
    const contributions = byPeer ?? new Map<number, readonly number[]>();
    this.received.delete(round);
    let agreed = this.own;
    for (const ids of contributions.values()) agreed = intersect(agreed, ids);
    contributions.set(this.rank, this.own);
    this.own = [];
    return { agreed, contributions };
  }
}
