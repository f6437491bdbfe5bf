/**
 * Transport: the small contract every backend (tcp, memory, and later mpi) implements, and the
 * only thing the algorithms and the engine know about the network.
 *
 * Two planes share the links between ranks:
 *
 * - Data plane. `send(peer, tag, data)` is matched on the receiving side by
 *   `recv(peer, tag, into)`, first-in first-out per (peer, tag). The receiver always knows the
 *   exact length (the algorithms do), so a message whose length differs from `into.byteLength`
 *   is a ProtocolError. A backend should land the bytes straight in `into` when the receive is
 *   posted before the bytes arrive, and stage them otherwise. Zero-length messages are legal.
 *   `send` resolves once `data` may be reused; the caller must not modify it before then.
 * - Control plane. `sendControl(peer, payload)` delivers a variable-length message to the
 *   handler set with `onControl` on the peer, in order per peer. The engine's negotiation
 *   uses it; payloads are small (ready reports with eager data are the largest). Like `send`,
 *   `sendControl` resolves once `payload` may be reused. On the receiving side the payload is
 *   valid only while the handler runs: a backend may reuse its bytes for the next message, so
 *   a handler copies what it keeps.
 *
 * Deadlines and failures:
 * - A `recv` that makes no progress for the backend's I/O timeout rejects with TimeoutError
 *   naming the peer and tag.
 * - When the link to a peer breaks (closed, reset, malformed frame), every pending and future
 *   send/recv with that peer rejects with PeerFailureError naming the rank, and the handler set
 *   with `onPeerFailure` is called once for that peer.
 * - `close()` rejects pending operations with ShutdownError, releases every socket and timer,
 *   and is idempotent.
 *
 * Activity (optional `setActive`): the engine calls `setActive(true)` when it has collectives
 * pending (queued, negotiating or running, or a shutdown handshake under way) and
 * `setActive(false)` when it has none; the default is inactive. While active, or while it has
 * send/recv/control operations pending, a backend watches its peers (a stopped or unreachable
 * peer fails with PeerFailureError even when no op is pending). While neither, it schedules
 * nothing periodically: an idle job uses no CPU. A backend may stop watching lazily (within
 * its watch interval). Repeated calls with the same value are cheap.
 *
 * A rank never sends to itself; `peer` is always in [0, size) and differs from `rank`.
 */
import { InvalidArgumentError, type PeerFailureError } from '../core/errors.js';
import type { ReduceOp, TypedArray, WireDType } from '../core/types.js';

/** Tags are u32 on every backend (4 bytes in a frame, an MPI tag space the addon maps onto). */
export const kMaxTag = 0xffff_ffff;

/** The argument check every backend makes on a send or recv: undefined when `peer` and `tag` are valid. */
export function invalidPeerOrTag(rank: number, size: number, peer: number, tag: number): InvalidArgumentError | undefined {
  if (!Number.isSafeInteger(peer) || peer < 0 || peer >= size || peer === rank) {
    return new InvalidArgumentError(`peer ${peer} is not another rank in [0, ${size}) (this is rank ${rank})`);
  }
  if (!Number.isSafeInteger(tag) || tag < 0 || tag > kMaxTag) {
    return new InvalidArgumentError(`tag must be an integer in [0, 2^32), got ${tag}`);
  }
  return undefined;
}

export type ControlHandler = (peer: number, payload: Uint8Array) => void;
export type PeerFailureHandler = (peer: number, error: PeerFailureError) => void;

export interface Transport {
  readonly rank: number;
  readonly size: number;
  send(peer: number, tag: number, data: Uint8Array): Promise<void>;
  recv(peer: number, tag: number, into: Uint8Array): Promise<void>;
  sendControl(peer: number, payload: Uint8Array): Promise<void>;
  onControl(handler: ControlHandler): void;
  onPeerFailure(handler: PeerFailureHandler): void;
  /** The engine has collectives pending: watch the peers (see "Activity" above). */
  setActive?(active: boolean): void;
  /**
   * Whether the transport's sockets keep the process alive (Node). A worker's engine never
   * asks; an engine on the caller's thread lets go of them at start, and holds the process with
   * a handle of its own while calls are pending (platform/node/engine_in_thread.ts).
   */
  holdProcess?(hold: boolean): void;
  close(): Promise<void>;
}

/** The bytes of a typed array, without copying. */
export function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** The collectives a backend may run natively (NativeCollectives). */
export type NativeOp = 'allreduce' | 'allgather' | 'broadcast' | 'reducescatter' | 'alltoall' | 'reduce' | 'gather' | 'scatter';

/**
 * Collectives a backend can run natively (MPI's tuned MPI_Allreduce, MPI_Allgatherv, ...). The
 * executor prefers them when the transport offers them and `supports` says yes; otherwise it
 * runs its own algorithm. Counts and offsets are in elements; blocks are laid out back to back
 * in rank order. Each resolves once this rank's part is done; every rank of the job calls the
 * same collective with the same counts, root and op.
 */
export interface NativeCollectives {
  supports(op: NativeOp, dtype: WireDType, reduceOp?: ReduceOp): boolean;
  /** In place on `buf`. */
  allreduce(buf: TypedArray, reduceOp: ReduceOp): Promise<void>;
  /**
   * Each of `bufs` (one dtype, `supports('allreduce', dtype, reduceOp)`) in place, in order, as
   * one submission: fusion without packing, for tensors large enough that copying them into one
   * buffer and back costs more than a call each.
   */
  allreduceEach?(bufs: readonly TypedArray[], reduceOp: ReduceOp): Promise<void>;
  /** `out` holds every rank's block (counts[r] elements); this rank's block is already in place. */
  allgather(out: TypedArray, counts: readonly number[]): Promise<void>;
  /** In place on `buf`: the root's values reach every rank. */
  broadcast(buf: TypedArray, root: number): Promise<void>;
  /** `input` holds one block per rank (counts[r] elements); `output` (counts[rank]) gets this rank's block reduced over ranks. */
  reducescatter?(input: TypedArray, output: TypedArray, counts: readonly number[], reduceOp: ReduceOp): Promise<void>;
  /** `input` holds sendCounts[j] elements for rank j, in rank order; `output` gets recvCounts[j] from rank j, in rank order. */
  alltoall?(input: TypedArray, sendCounts: readonly number[], output: TypedArray, recvCounts: readonly number[]): Promise<void>;
  /** In place on the root's `buf` (MPI_IN_PLACE there); other ranks' `buf` is only read. */
  reduce?(buf: TypedArray, reduceOp: ReduceOp, root: number): Promise<void>;
  /** The root's `out` gets every rank's block (counts[r] elements, its own already in place); others pass their block as `input`. */
  gather?(input: TypedArray, out: TypedArray | undefined, counts: readonly number[], root: number): Promise<void>;
  /** The root's `input` holds one block per rank (counts[r]); every rank's `output` (counts[rank]) gets its block. */
  scatter?(input: TypedArray | undefined, output: TypedArray, counts: readonly number[], root: number): Promise<void>;
}

/** A transport that also runs some collectives natively exposes them as `native`. */
export function nativeCollectivesOf(transport: Transport): NativeCollectives | undefined {
  return (transport as Partial<{ native: NativeCollectives }>).native;
}
