/**
 * The negotiation messages between a rank's engine and the coordinator (rank 0).
 *
 * A rank reports the collectives it has ready as a RequestList (the end of the list is the
 * "DONE" marker of the seed's protocol); the coordinator answers every rank with the same
 * ResponseList, whose order is the order in which all ranks execute. Collectives the response
 * cache knows skip rank 0: ranks agree on them among themselves in ready rounds.
 */
import type { ErrorClassName } from '../../core/errors.js';
import type { WireDType } from '../../core/types.js';
import type { Agreement } from '../ops/op_spec.js';
import type { Request } from '../ops/registry.js';
import type { SettingsChange } from '../tuning/tuned_settings.js';

export type { CollectiveOp } from '../../core/collective_ops.js';
export type { Request } from '../ops/registry.js';

/**
 * Run `names` (several when fused, fusion.ts) with what every rank agreed on: the ruling request's
 * parameters (its name is the first name's) and the per-rank counts negotiation gathered.
 */
export interface ExecuteResponse extends Agreement<Request> {
  kind: 'execute';
  names: string[];
}

/** Fail `names` on every rank that has them, with the same error everywhere. */
export interface ErrorResponse {
  kind: 'error';
  names: string[];
  errorKind: ErrorClassName;
  message: string;
  /**
   * A stall: the ranks whose submissions waited, the only ones it fails. A rank outside it may
   * hold a newer submission of the name by the time the response reaches it. Unset: every rank.
   */
  ranks?: number[];
}

/**
 * The ranks of the set that have joined (ops/join.ts), from this point in the agreed order on:
 * while any has, every request goes to rank 0 in full (no ready rounds), and a joined rank takes
 * part in what the others run. The join's own execute response ends it.
 */
export interface JoinedResponse {
  kind: 'joined';
  names: [];
  ranks: number[];
}

export type Response = ExecuteResponse | ErrorResponse | JoinedResponse;

/** On the wire, a response the response cache holds travels as its ids (response_cache.ts). */
export type WireResponse = Response | { kind: 'cached'; ids: number[] };

/**
 * Messages between engines. Those of negotiation belong to a process set (`set`: its id; unset,
 * the world, set 0) and its ranks are numbered inside the set.
 */
export type ControlMessage =
  /** A rank's newly ready requests that are not in the response cache, to its set's rank 0. */
  | { type: 'requests'; set?: number; requests: Request[] }
  /**
   * Rank 0's decisions, to every rank. They run once the receiving rank has closed
   * `afterRounds` ready rounds (ready_rounds.ts), which puts them at the same place among the
   * cached collectives on every rank. `evict`: cache ids that leave the cache first. `settings`:
   * autotune's change (tuning/), which every rank applies at that same place, before the responses.
   */
  | {
      type: 'responses';
      set?: number;
      afterRounds: number;
      evict: number[];
      responses: WireResponse[];
      settings?: SettingsChange;
    }
  /**
   * A rank's contribution to a ready round: the cache ids it has ready, and the buffers of the
   * small allreduces among them that it reports for the first time (eager_exchange.ts).
   */
  | { type: 'ready'; set?: number; round: number; ids: readonly number[]; eager: { id: number; data: Uint8Array }[] }
  /** One step of a ready round's recursive-doubling exchange (ready_doubling.ts), to one partner. */
  | ({ type: 'ready-step'; set?: number } & StepMessage)
  /** A rank's shutdown() reached its engine; the coordinator answers shutdown-ack once all did. */
  | { type: 'shutdown' }
  | { type: 'shutdown-ack' }
  /**
   * Point-to-point (point_to_point.ts), between the two ranks only: a send offers its message
   * (`set`: the process set it belongs to, unset: the world)...
   */
  | { type: 'p2p-offer'; set?: number; tag: number; sequence: number; dtype: WireDType; length: number }
  /**
   * ...the receiver accepts it (the data follows), refuses it (with the mismatch both sides
   * report), or confirms that the sender withdrew it before it was matched...
   */
  | { type: 'p2p-answer'; sequence: number; outcome: PeerOutcome; message: string }
  /** ...which the sender asks for once its deadline has passed. */
  | { type: 'p2p-withdraw'; set?: number; sequence: number; tag: number };

export type PeerOutcome = 'accepted' | 'mismatch' | 'withdrawn';
export const kPeerOutcomes: readonly PeerOutcome[] = ['accepted', 'mismatch', 'withdrawn'];

/** One rank's contribution to a ready round, as it travels to rank 0 (ready_doubling.ts). */
export interface Contribution {
  rank: number;
  ids: number[];
}

/** An eager buffer with the rank it came from. */
export interface OriginEagerData {
  id: number;
  data: Uint8Array;
  rank: number;
}

/** One message of a ready round's exchange by recursive doubling (ready_doubling.ts), carried as 'ready-step'. */
export interface StepMessage {
  round: number;
  step: number;
  urgent: boolean;
  /** The AND of the contributions the sender has combined, ascending. */
  ids: readonly number[];
  /** Rank 0's decision messages published before it contributed to this round (0 until rank 0's part is in). */
  decisions: number;
  contributions: Contribution[];
  eager: OriginEagerData[];
}
