/** What the caller's side submits for a send or a recv (point_to_point.ts runs it). */
import type { WireDType } from '../core/types.js';

/** A send or recv, as the caller's side submits it. */
export interface PeerRequest {
  op: 'send' | 'recv';
  /** Unique per call on this rank (the facade's in-flight check): 'send to 1, tag 0 #3'. */
  name: string;
  /** The receiver of a send, the sender of a recv. */
  peer: number;
  /** The user's tag. */
  tag: number;
  dtype: WireDType;
  length: number;
  /** This call's deadline in ms (option 'timeoutMs'); unset: the job's stall timeout. */
  timeoutMs?: number;
}
