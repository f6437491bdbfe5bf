/**
 * The messages between the caller's thread (api/engine_client.ts) and the engine's thread (a
 * Node worker thread: worker.ts; a browser's module Web Worker: web_worker.ts), and the data
 * the engine starts with. Tensor data never travels in them by copy: buffers are
 * SharedArrayBuffer-backed views that both threads see.
 */

import type { Config } from '../../core/config.js';
import type { ErrorRecord } from '../../core/errors.js';
import type { TypedArray } from '../../core/types.js';
import type { BackendName } from '../../transport/backends.js';
import type { Request } from '../wire/messages.js';
import type { PeerRequest } from '../wire/peer_request.js';

/** What the caller's thread hands a new engine, on any platform (the channel between them aside). */
export interface EngineInit {
  config: Config;
  /**
   * The canonical text of the settings every rank must share (core/agreed_settings.ts), written
   * by the caller's thread, which has the settings table: the engine compares it at start-up.
   */
  agreedSettings: string;
  /**
   * Int32Array over a SharedArrayBuffer: [kSignalCompletions] counts completions posted (a caller
   * blocked in a ...Sync call waits on it); [kSignalBurst] is 1 while the caller is inside a
   * synchronous burst of calls (engine/ready/burst_gate.ts).
   */
  signal: Int32Array;
  /** rr.stats()'s counters: the engine writes them, the caller's thread reads them (stats.ts). */
  stats?: SharedArrayBuffer;
  /**
   * Where the engine writes the completions of ...Sync calls (sync_mailbox.ts): a browser's
   * caller, which cannot drain its port while it blocks. Unset on Node, whose caller can.
   */
  mailbox?: SharedArrayBuffer;
  /** The rings of the steady state's hand-off (hand_off.ts): calls of bound submissions and their completions. */
  handOff: SharedArrayBuffer;
}

/**
 * @internal A Node worker thread's workerData: the init data and the port the engine posts
 * completions on. (Internal: kept out of the package's .d.ts, which then need no @types/node.)
 */
export interface WorkerInit extends EngineInit {
  /** A MessagePort of its own (not the worker's channel), so that a blocked caller can drain it. */
  port: import('node:worker_threads').MessagePort;
}

/**
 * One call the caller submitted: the engine queues this object itself (tensor_queue.ts). A
 * submission bound to a slot is kept by the engine, and later calls of it travel through the
 * hand-off ring as the slot and a new id (hand_off.ts).
 */
export interface Submission<R extends Request | PeerRequest = Request | PeerRequest> {
  /** Positive for calls sent as messages, negative for calls through the ring. */
  id: number;
  request: R;
  /** allreduce/broadcast: the output (already holding this rank's input); allgather: the input copy. */
  buffer: TypedArray | undefined;
  /** Allgather with option 'out': where the result goes (the engine allocates it otherwise). */
  output?: TypedArray;
  /**
   * `buffer` is fresh memory (an output allocated for this call): once done, the engine counts
   * it towards collecting its handles, so the memory is freed, and reused, soon.
   */
  fresh?: true;
  /** The process set of a collective; unset: the world. */
  set?: number;
  /** A ...Sync call made it: with a mailbox, its completion goes there (sync_mailbox.ts). */
  sync?: boolean;
  /** Keep this submission under `slot`: the caller's later calls of it come through the ring. */
  slot?: number;
  /** A slot the caller no longer uses (the name's previous binding, or one it evicted). */
  drop?: number;
}

/**
 * The members of a grouped call, bound together: the caller's later calls of the whole group
 * travel through the hand-off ring as one entry, the group's slot (hand_off.ts).
 */
export interface GroupBinding {
  slot: number;
  /** The members' slots, in member order (bound by the same message or before it). */
  members: number[];
  /** A group slot the caller no longer uses (the group name's previous binding, or one it evicted). */
  drop?: number;
}

/**
 * Caller → engine. Submissions made in one synchronous burst travel as one message, with the
 * group bindings made in it (after the submissions that bind their members).
 * 'ring': the caller wrote calls to the hand-off ring (hand_off.ts).
 */
export type ToEngine =
  | { type: 'enqueue'; submissions: Submission[]; groups?: GroupBinding[] }
  | { type: 'ring' }
  | { type: 'shutdown' };

/** What one call hands back beside its completion (unset fields: the result is in the caller's memory). */
export interface CallResult {
  output?: TypedArray;
  shape?: number[];
  /** Alltoall's received splits, join's last rank, the senders of a recv or batchSendRecv (point_to_point.ts). */
  counts?: number[];
}

/** Whether a call hands back anything beside its completion. */
export function hasResult(result: CallResult): boolean {
  return result.output !== undefined || result.shape !== undefined || result.counts !== undefined;
}

/**
 * Engine → caller; the port carries arrays of these (the completions of one engine turn), and an
 * empty array when the turn's completions are all in the hand-off ring (hand_off.ts).
 */
export type FromEngine =
  | { type: 'ready'; backend: BackendName }
  | { type: 'init-failed'; error: ErrorRecord }
  /** `members`: a group call's (hand_off.ts) member results, when one has any (CallResult). */
  | ({ type: 'done'; id: number; members?: (CallResult | undefined)[] } & CallResult)
  | { type: 'failed'; id: number; error: ErrorRecord }
  | { type: 'closed' };

export const kSignalCompletions = 0;
export const kSignalBurst = 1;
