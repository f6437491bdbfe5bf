/** What the caller's side submits for a send, a recv or a batch of them (point_to_point.ts runs it). */
import type { WireDType } from '../../core/types.js';

/** A recv's `peer` when it takes the first matching message from any rank of its set (`from: 'any'`). */
export const kAnyPeer = -1;

/** One send or recv, as the caller's side submits it. */
export interface PeerCall {
  op: 'send' | 'recv';
  /** Unique per call on this rank (the facade's in-flight check): 'send to 1, tag 0 #3'. */
  name: string;
  /** The receiver of a send, the sender of a recv, as job ranks; kAnyPeer: a recv from any rank of its set. */
  peer: number;
  /** The user's tag. */
  tag: number;
  dtype: WireDType;
  length: number;
  /** This call's deadline in ms (option 'timeoutMs'); unset: the job's stall timeout. */
  timeoutMs?: number;
  /** The process set the message belongs to (option 'processSet'): it matches only calls of that set. Unset: the world. */
  set?: number;
  /** In a batch: where this call's elements start in the batch's buffer, in bytes. */
  offset?: number;
}

/**
 * Sends and recvs posted together (batchSendRecv): one submission, one buffer holding every
 * call's data at its `offset`, settled once every call has settled.
 */
export interface PeerBatch {
  op: 'batchSendRecv';
  name: string;
  calls: PeerCall[];
}

export type PeerRequest = PeerCall | PeerBatch;
