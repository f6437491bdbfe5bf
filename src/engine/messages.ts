/**
 * The negotiation messages between a rank's engine and the coordinator (rank 0).
 *
 * A rank reports the collectives it has ready as a RequestList (the end of the list is the
 * "DONE" marker of the seed's protocol); the coordinator answers every rank with the same
 * ResponseList, whose order is the order in which all ranks execute. Collectives the response
 * cache knows skip rank 0: ranks agree on them among themselves in ready rounds.
 */
import type { ErrorClassName } from '../core/errors.js';
import type { CollectiveOp, DType, ReduceOp } from '../core/types.js';

/** What one rank asks for: everything the coordinator needs to check that ranks agree. */
export interface Request {
  name: string;
  op: CollectiveOp;
  dtype: DType;
  shape: number[];
  reduceOp: ReduceOp;
  /** Broadcast root; -1 for other ops. */
  root: number;
  /**
   * Allgather with option 'out' only: the length of the caller's output in elements. Rank 0
   * checks it against the gathered size, so a wrong one fails on every rank alike.
   */
  outLength?: number;
}

/** Run `names` (one name today; several once fusion lands) with these agreed parameters. */
export interface ExecuteResponse {
  kind: 'execute';
  names: string[];
  op: CollectiveOp;
  dtype: DType;
  reduceOp: ReduceOp;
  root: number;
  /** Allgather only: the first dimension of each rank's tensor, in rank order. */
  firstDims: number[];
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

export type Response = ExecuteResponse | ErrorResponse;

/** On the wire, a response the response cache holds travels as its ids (response_cache.ts). */
export type WireResponse = Response | { kind: 'cached'; ids: number[] };

export type ControlMessage =
  /** A rank's newly ready requests that are not in the response cache, to rank 0. */
  | { type: 'requests'; requests: Request[] }
  /**
   * Rank 0's decisions, to every rank. They run once the receiving rank has closed
   * `afterRounds` ready rounds (ready_rounds.ts), which puts them at the same place among the
   * cached collectives on every rank. `evict`: cache ids that leave the cache first.
   */
  | { type: 'responses'; afterRounds: number; evict: number[]; responses: WireResponse[] }
  /**
   * A rank's contribution to a ready round: the cache ids it has ready, and the buffers of the
   * small allreduces among them that it reports for the first time (eager_exchange.ts).
   */
  | { type: 'ready'; round: number; ids: number[]; eager: { id: number; data: Uint8Array }[] }
  /** A rank's shutdown() reached its engine; the coordinator answers shutdown-ack once all did. */
  | { type: 'shutdown' }
  | { type: 'shutdown-ack' };
