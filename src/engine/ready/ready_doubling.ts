/**
 * The recursive-doubling exchange of ready rounds (ready_rounds.ts): an allreduce (AND) of the
 * ranks' ready bit-vectors in about log2 N messages per rank, where the all-to-all exchange
 * (ready_all_to_all.ts) sends N - 1.
 *
 * How it works, for N ranks with P the largest power of two <= N and E = N - P extra ranks:
 * - Fold in (step 0): extra rank P + i sends its contribution to core rank i (i < E).
 * - Steps 1..log2 P: core rank c exchanges its running AND with core rank c XOR 2^(k-1) and keeps
 *   the AND of both. After the last step every core rank holds the AND of all N contributions.
 * - Fold out (step log2 P + 1): core rank i sends the result back to extra rank P + i.
 * A core rank that contributes before its extra has must tell the extra that the round is open
 * (step 0 the other way, a notice with no other use), or an idle extra would never hear of it.
 * So a core rank sends log2 P messages, up to two more if it has an extra, and an extra rank
 * one: at most ceil(log2 N) + 1 per rank and round. The critical path is log2 P one-way
 * messages when N is a power of two, two or three more otherwise.
 *
 * Rank 0 alone needs every rank's own contribution (its coordinator names the ranks that hold
 * a stalled id up): they travel to it up the binomial tree inside the same messages. Core rank
 * c sends the contributions it has gathered at the step that crosses its lowest set bit (an
 * extra with its fold-in), and no other; rank 0 receives its half, quarter, ... of the ranks.
 * Each is sent as what it holds beyond the message's AND (the AND of exactly those ranks), and
 * ranks with nothing beyond it are left out: in a steady loop, where every rank reports the
 * same ids, the contributions cost nothing.
 *
 * Eager buffers (eager_exchange.ts) ride along as an allgather: each message carries every
 * buffer its sender has gathered this round, tagged with its origin rank, so every rank holds
 * every rank's buffer when the round closes, exactly as with the all-to-all exchange, and
 * reduces them in rank order (the same result, bit for bit). Eager collectives are limited to
 * sets of at most 8 ranks, so a message carries at most 8 buffers per id.
 *
 * Rank 0's decisions run after a number of rounds (rank0_decisions.ts). All-to-all, a peer
 * cannot close a round before a decision sent ahead of rank 0's contribution to it, which
 * follows the decision on the same ordered link; here rank 0's contribution may reach a peer
 * through others first. So rank 0 stamps its contribution with the number of decision messages
 * it has published, the count travels with the AND, and a rank closes the round only once it
 * has received that many (ReadyRounds' `decisionsReceived`).
 *
 * A message also says whether its sender's side answered on a grace timer (`urgent`): a rank
 * with nothing pending that hears of the round through it answers at once instead of starting
 * a timer of its own, so holding back costs one grace period, not one per step.
 */
import { ProtocolError } from '../../core/errors.js';
import { detachControl } from '../wire/codec.js';
import type { Contribution, OriginEagerData, StepMessage } from '../wire/messages.js';
import type { EagerData } from './eager_exchange.js';
import { checkRound, intersect, type RoundExchange, type RoundOutcome } from './ready_rounds.js';

interface Action {
  send: boolean;
  step: number;
  peer: number;
  /** A send that carries the gathered contributions toward rank 0, or a receive of one. */
  carries: boolean;
  /** A receive that carries them: the ranks whose contributions it brings. */
  block?: number[];
  /** A core rank's notice to its extra, sent only if the extra's fold in has not arrived. */
  notice?: boolean;
}

/** The sends and receives of `rank` in one round, in order (see the header). */
export function doublingSchedule(rank: number, size: number): Action[] {
  let core = 1;
  while (core * 2 <= size) core *= 2;
  const levels = Math.log2(core);
  const extras = size - core;
  if (rank >= core) {
    const partner = rank - core;
    return [
      { send: true, step: 0, peer: partner, carries: true },
      { send: false, step: levels + 1, peer: partner, carries: false },
    ];
  }
  const actions: Action[] = [];
  if (rank < extras) {
    actions.push({ send: true, step: 0, peer: rank + core, carries: false, notice: true });
    actions.push({ send: false, step: 0, peer: rank + core, carries: true, block: [rank + core] });
  }
  for (let k = 1; k <= levels; k++) {
    const bit = 1 << (k - 1);
    const peer = rank ^ bit;
    // The lowest set bit of `rank` is this step's: its gathered block goes down the tree.
    const carries = (rank & (2 * bit - 1)) === bit;
    // The peer's block: core ranks peer .. peer + bit - 1 (its low bits are zero) and their extras.
    const theirs = (peer & (2 * bit - 1)) === bit;
    const block: number[] = [];
    if (theirs) for (let q = peer; q < peer + bit; q++) block.push(...(q < extras ? [q, q + core] : [q]));
    actions.push(
      { send: true, step: k, peer, carries },
      theirs ? { send: false, step: k, peer, carries: true, block } : { send: false, step: k, peer, carries: false },
    );
  }
  if (rank < extras) actions.push({ send: true, step: levels + 1, peer: rank + core, carries: false });
  return actions;
}

interface OpenRound {
  next: number;
  ids: readonly number[];
  decisions: number;
  contributions: Map<number, readonly number[]>;
  eager: OriginEagerData[];
  urgent: boolean;
}

export class DoublingExchange implements RoundExchange {
  private readonly actions: Action[];
  /** The peer each received step comes from. */
  private readonly sender = new Map<number, number>();
  /** Messages received by round (the open one and, from peers ahead, the next), by step. */
  private readonly inbox = new Map<number, Map<number, StepMessage>>();
  private readonly rounds = new Map<number, OpenRound>();
  /** Extra ranks: the rounds their core rank has said are open (and whether urgently). */
  private readonly notices = new Map<number, boolean>();
  /** Extra ranks: their core rank. */
  private readonly core: number | undefined;

  constructor(
    private readonly rank: number,
    size: number,
    /** What this rank contributes of `ready` (a prefix when its eager buffers would not fit), with those buffers. */
    private readonly prepare: (ready: readonly number[]) => { ids: readonly number[]; eager: EagerData[] },
    private readonly send: (peer: number, message: StepMessage) => void,
    /** Rank 0: the decision messages it has published so far (others are not asked). */
    private readonly published: () => number = () => 0,
  ) {
    this.actions = doublingSchedule(rank, size);
    for (const a of this.actions) if (!a.send) this.sender.set(a.step, a.peer);
    const first = this.actions[0];
    this.core = first?.send && first.step === 0 && !first.notice ? first.peer : undefined;
  }

  /** A peer's step message; `open` is the receiver's open round. Throws ProtocolError for one it cannot send. */
  receive(peer: number, message: StepMessage, open: number): void {
    const { round, step } = message;
    checkRound(peer, round, open);
    if (step === 0 && peer === this.core) {
      this.notices.set(round, message.urgent || (this.notices.get(round) ?? false));
      return;
    }
    if (this.sender.get(step) !== peer) {
      throw new ProtocolError(
        `rank ${peer} sent step ${step} of ready round ${round}, which rank ${this.rank} expects from no such peer`,
      );
    }
    let bySteps = this.inbox.get(round);
    if (!bySteps) {
      bySteps = new Map();
      this.inbox.set(round, bySteps);
    }
    if (bySteps.has(step)) throw new ProtocolError(`rank ${peer} sent step ${step} of ready round ${round} twice`);
    // Kept until its step and forwarded in later ones: the eager buffers are copied out of the
    // message, whose bytes the transport may reuse once this returns.
    bySteps.set(step, detachControl(message));
    this.pump(round);
  }

  contribute(round: number, ready: readonly number[], urgent: boolean): readonly number[] {
    const { ids, eager } = this.prepare(ready);
    this.rounds.set(round, {
      next: 0,
      ids,
      decisions: this.rank === 0 ? this.published() : 0,
      contributions: new Map([[this.rank, ids]]),
      eager: eager.map((e) => ({ rank: this.rank, ...e })),
      urgent,
    });
    this.pump(round);
    return ids;
  }

  opened(round: number): boolean {
    return (this.inbox.get(round)?.size ?? 0) > 0 || this.notices.has(round);
  }

  urgent(round: number): boolean {
    if (this.notices.get(round)) return true;
    for (const message of this.inbox.get(round)?.values() ?? []) if (message.urgent) return true;
    return false;
  }

  take(round: number): RoundOutcome | undefined {
    const state = this.rounds.get(round);
    if (!state || state.next < this.actions.length) return undefined;
    this.rounds.delete(round);
    this.inbox.delete(round);
    this.notices.delete(round);
    const { ids: agreed, decisions } = state;
    return this.rank === 0 ? { agreed, decisions, contributions: state.contributions } : { agreed, decisions };
  }

  /** Runs this rank's part of `round` as far as the messages received allow. */
  private pump(round: number): void {
    const state = this.rounds.get(round);
    if (!state) return;
    const inbox = this.inbox.get(round);
    for (; state.next < this.actions.length; state.next++) {
      const action = this.actions[state.next] as Action;
      if (action.notice) {
        if (!inbox?.has(action.step))
          this.send(action.peer, { round, step: 0, urgent: state.urgent, ids: [], decisions: 0, contributions: [], eager: [] });
        continue;
      }
      if (action.send) {
        this.send(action.peer, {
          round,
          step: action.step,
          urgent: state.urgent,
          ids: state.ids,
          decisions: state.decisions,
          contributions: action.carries ? beyond(state.contributions, state.ids) : [],
          // The fold out skips the extra's own buffers; a doubling partner's block has none of these.
          eager: state.eager.filter((e) => e.rank !== action.peer),
        });
        continue;
      }
      const message = inbox?.get(action.step);
      if (!message) return;
      inbox?.delete(action.step);
      if (action.carries) {
        for (const rank of action.block ?? []) state.contributions.set(rank, message.ids);
        for (const { rank, ids } of message.contributions) state.contributions.set(rank, union(message.ids, ids));
      }
      state.ids = intersect(state.ids, message.ids);
      state.decisions = Math.max(state.decisions, message.decisions);
      state.eager.push(...message.eager);
      state.urgent ||= message.urgent;
    }
  }
}

/** What each contribution holds beyond `and` (which is in all of them), for the ranks with anything more. */
function beyond(contributions: ReadonlyMap<number, readonly number[]>, and: readonly number[]): Contribution[] {
  const out: Contribution[] = [];
  const held = new Set(and);
  for (const [rank, ids] of contributions) {
    if (ids.length === and.length) continue;
    out.push({ rank, ids: ids.filter((id) => !held.has(id)) });
  }
  return out;
}

/** Both ascending lists merged, ascending. */
function union(a: readonly number[], b: readonly number[]): number[] {
  return [...new Set([...a, ...b])].sort((x, y) => x - y);
}
