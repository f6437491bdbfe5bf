/**
 * Receive path of one peer link: a state machine driven by the socket's `onread` hooks (see
 * rendezvous/read_port.ts for Node's contract).
 *
 * How it works. Before every read, `buffer()` picks where the kernel writes:
 * - A payload is in progress and at least kDirectMinBytes of it remain: the rest of the
 *   payload's destination, exactly up to its end (so the next frame's bytes never land there).
 *   The destination is the posted recv's `into` (zero copy, also into SharedArrayBuffer
 *   memory), or the message's own staging buffer when no recv is posted yet.
 * - Otherwise: the free tail of a reusable 64 KiB stage. `onRead` then parses every frame in
 *   it: headers, small payloads (copied to their destination), several frames per read. Only a
 *   partial header (< 12 bytes) is carried over to the next read.
 *
 * Matching is FIFO per tag. A data header either takes the oldest posted recv of its tag or
 * queues as "arrived" with a staging buffer of its exact length (one allocation per unmatched
 * message, none for matched ones). A recv posted later takes the oldest arrived message: copies
 * what is there, and if the message is still arriving, redirects the rest straight into `into`.
 * A length mismatch rejects that recv with ProtocolError and discards the message; the link
 * stays up. Control payloads are assembled in one buffer the receiver reuses (grown to the
 * largest payload, kept up to kControlKeptBytes) and handed to `onControl`, which must copy what
 * it keeps (the transport's contract); link and descriptor payloads get buffers of their own.
 *
 * A shared data frame (shm_lane.ts) is matched the same way once its descriptor is whole: its
 * bytes are copied out of the lane into the posted recv's `into` and the slot is handed back.
 * With no recv posted, the message keeps its slot until one is (so its bytes are copied once,
 * with no staging buffer), but only while that leaves the sender a free slot, counting the slots
 * read here whose credits have not gone back yet (SharedLane.owed, handed back at once when they
 * would make the difference): beyond that it is staged like any message, so a recv waiting
 * behind unclaimed messages can always be served.
 */
import { performance } from 'node:perf_hooks';
import type { BufferPool } from '../../core/buffer_pool.js';
import { ProtocolError } from '../../core/errors.js';
import type { ReadSink } from '../../rendezvous/read_port.js';
import { Fifo, type PendingOp } from '../pending_op.js';
import {
  decodeHeader,
  type FrameHeader,
  type FrameLimits,
  kHeaderBytes,
  kKindControl,
  kKindData,
  kKindLink,
  kKindSharedData,
} from './framing.js';
import { decodeDescriptor } from './shm_lane.js';

const kStageBytes = 64 * 1024;
/** Staging buffers from this size up come from the pool (see ReceiverHooks.stagingPool). */
const kPooledStagingMinBytes = 64 * 1024;
/** Below this, one more staged read (and a copy) beats a read of its own. */
const kDirectMinBytes = 16 * 1024;
const kEmpty = new Uint8Array(0);
/** The reused control payload buffer is kept up to this size (a report with eager data fits). */
const kControlKeptBytes = 2 * 1024 * 1024;

interface PostedRecv {
  into: Uint8Array;
  op: PendingOp;
}

interface Inbound {
  /** Not data: assembled in its own buffer and handed to onControl, to onLink when `link`, or matched as a shared message when `shared`. */
  control: boolean;
  link: boolean;
  shared: boolean;
  tag: number;
  length: number;
  received: number;
  /** Where bytes go while no recv has taken the message (null once taken or dropped). */
  staged: Uint8Array | null;
  recv: PostedRecv | null;
  /** Its recv was refused for a length mismatch: bytes are read and discarded. */
  dropped: boolean;
  /** A shared message whose bytes still wait in this lane slot (else -1). */
  slot: number;
}

interface TagQueue {
  arrived: Fifo<Inbound>;
  posted: Fifo<PostedRecv>;
}

export interface ReceiverHooks {
  limits: FrameLimits;
  /** Names the link in error messages: "rank 2 (10.0.0.2:4711)". */
  who: string;
  onControl(payload: Uint8Array): void;
  /** A link frame of the transport itself (framing.ts): its message and payload. */
  onLink(message: number, payload: Uint8Array): void;
  /** A malformed frame: the link is broken. */
  onViolation(error: ProtocolError): void;
  /**
   * The shared-memory lane from this peer, once this side accepted it: copies slot `slot` into
   * `into` (throws ProtocolError for a bad descriptor), and hands a slot back to the sender.
   */
  shared?(): SharedLane | undefined;
  /**
   * Where staging buffers of large unmatched messages come from, and go back to once a recv
   * has copied them out: fresh memory costs its page faults at first touch (0.28 GB/s here).
   */
  stagingPool?: BufferPool;
}

/** The receiving end of a shared-memory lane, as the receiver sees it. */
export interface SharedLane {
  readonly slots: number;
  read(slot: number, into: Uint8Array): void;
  release(slot: number): void;
  /** Slots read and released here whose credits have not gone back to the sender yet. */
  owed(): number;
  /** Sends those credits back now. */
  returnOwed(): void;
}

/**
 * Where received data payload bytes went: written by the kernel straight into a recv's `into`,
 * copied into it (from the stage or a staging buffer), or staged for a recv not yet posted.
 */
export interface ReceiveStats {
  zeroCopyBytes: number;
  copiedBytes: number;
  stagedBytes: number;
  /** Copied from the shared-memory lane straight into a posted recv's `into`. */
  sharedBytes: number;
}

export class PeerReceiver implements ReadSink {
  readonly stats: ReceiveStats = { zeroCopyBytes: 0, copiedBytes: 0, stagedBytes: 0, sharedBytes: 0 };
  /** performance.now() of the last read: liveness (the peer was heard) and op progress. */
  lastReadAt = performance.now();
  private readonly stage = new Uint8Array(kStageBytes);
  private end = 0;
  private cur: Inbound | null = null;
  /** The array last returned by buffer(), and the payload destination it views (if direct). */
  private handed: Uint8Array | null = null;
  private handedDest: Uint8Array | null = null;
  private readonly queues = new Map<number, TagQueue>();
  private dead = false;
  private failure: Error | null = null;
  /** Shared messages waiting for a recv in their lane slot. */
  private held = 0;

  /** Slots of the peer's lane that unclaimed messages hold here. */
  get heldSlots(): number {
    return this.held;
  }
  /** Staging buffers that came from the pool. */
  private readonly pooled = new WeakSet<Uint8Array>();
  /** Where control payloads are assembled, one at a time. */
  private controlBytes = new Uint8Array(256);

  constructor(private readonly hooks: ReceiverHooks) {}

  buffer(): Uint8Array {
    const cur = this.cur;
    if (cur !== null && !cur.dropped && cur.length - cur.received >= kDirectMinBytes) {
      const dest = (cur.recv?.into ?? cur.staged) as Uint8Array;
      this.handedDest = dest;
      this.handed = dest.subarray(cur.received, cur.length);
    } else {
      this.handedDest = null;
      this.handed = this.end === 0 ? this.stage : this.stage.subarray(this.end);
    }
    return this.handed;
  }

  onRead(nread: number, buf: Uint8Array): boolean {
    if (this.dead) return false;
    this.lastReadAt = performance.now();
    try {
      if (buf !== this.handed) this.ingestForeign(buf.subarray(0, nread));
      else if (this.handedDest !== null) this.landedDirect(nread, buf);
      else {
        this.end += nread;
        this.parse();
      }
    } catch (error) {
      this.dead = true;
      this.hooks.onViolation(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
      return false;
    }
    return !this.dead;
  }

  /**
   * Posts a recv for the next message with `tag`. After fail(), only messages that arrived
   * whole before the link broke can still be taken; anything else rejects with the failure.
   */
  post(tag: number, into: Uint8Array, op: PendingOp): void {
    const queue = this.queue(tag);
    const inbound = queue.arrived.shift();
    if (inbound === undefined && this.failure === null) {
      queue.posted.push({ into, op });
      return;
    }
    this.release(tag, queue);
    if (inbound === undefined) {
      op.reject(this.failure as Error);
      return;
    }
    if (inbound.slot >= 0) {
      this.claimHeld(inbound, tag, into, op);
      return;
    }
    if (inbound.length !== into.byteLength) {
      op.reject(this.mismatch(tag, into.byteLength, inbound.length));
      if (inbound.received === inbound.length) this.recycle(inbound.staged);
      inbound.staged = null;
      inbound.dropped = true;
      return;
    }
    const staged = inbound.staged as Uint8Array;
    inbound.staged = null;
    this.stats.copiedBytes += inbound.received;
    if (inbound.received === inbound.length) {
      into.set(staged);
      this.recycle(staged);
      op.resolve();
      return;
    }
    // (Not recycled: the read in progress may still land in it; landedDirect copies it over.)
    // Still arriving (it is this.cur): move what is here, the rest lands in `into` directly.
    into.set(staged.subarray(0, inbound.received));
    inbound.recv = { into, op };
  }

  /**
   * Stops reading and rejects every waiting recv. Messages that arrived whole stay claimable:
   * a peer that sends its last message and closes at once must not lose it. Idempotent.
   */
  fail(error: Error): void {
    this.dead = true;
    this.failure ??= error;
    this.cur?.recv?.op.reject(error);
    this.cur = null;
    for (const [tag, queue] of this.queues) {
      for (const posted of queue.posted.drain()) posted.op.reject(error);
      const whole = new Fifo<Inbound>();
      for (const inbound of queue.arrived.drain()) {
        // The lane closes with the link: a held message moves to memory, like one that arrived whole.
        if (inbound.slot >= 0 && !this.tryUnhold(inbound)) continue;
        if (inbound.received === inbound.length) whole.push(inbound);
      }
      if (whole.length === 0) this.queues.delete(tag);
      else queue.arrived = whole;
    }
    this.held = 0;
  }

  private landedDirect(nread: number, buf: Uint8Array): void {
    const cur = this.cur as Inbound; // only fail() clears it, and then `dead` stops us first
    if (!cur.dropped) {
      const dest = (cur.recv?.into ?? cur.staged) as Uint8Array;
      // A recv posted since buffer() redirected the message: the bytes are in the old staging.
      const copied = dest !== this.handedDest;
      if (copied) dest.set(buf.subarray(0, nread), cur.received);
      this.count(cur, nread, copied);
    }
    this.advance(cur, nread);
  }

  /** Bytes that landed in an array we did not hand out (the first read after the handshake). */
  private ingestForeign(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.byteLength && !this.dead) {
      const n = Math.min(bytes.byteLength - at, kStageBytes - this.end);
      this.stage.set(bytes.subarray(at, at + n), this.end);
      this.end += n;
      at += n;
      this.parse();
    }
  }

  private parse(): void {
    const stage = this.stage;
    const end = this.end;
    let at = 0;
    while (at < end && !this.dead) {
      const cur = this.cur;
      if (cur !== null) {
        const n = Math.min(end - at, cur.length - cur.received);
        if (!cur.dropped) ((cur.recv?.into ?? cur.staged) as Uint8Array).set(stage.subarray(at, at + n), cur.received);
        this.count(cur, n, true);
        at += n;
        this.advance(cur, n);
        continue;
      }
      if (end - at < kHeaderBytes) break;
      const header = decodeHeader(stage, at, this.hooks.limits);
      at += kHeaderBytes;
      this.begin(header);
    }
    if (this.dead) return;
    // Carry a partial header over to the front; everything else is consumed.
    if (at < end) stage.copyWithin(0, at, end);
    this.end = end - at;
  }

  private begin(header: FrameHeader): void {
    const inbound: Inbound = {
      control: header.kind !== kKindData,
      link: header.kind === kKindLink,
      shared: header.kind === kKindSharedData,
      tag: header.tag,
      length: header.length,
      received: 0,
      staged: null,
      recv: null,
      dropped: false,
      slot: -1,
    };
    if (inbound.control) {
      inbound.staged = header.kind === kKindControl ? this.controlPayload(header.length) : new Uint8Array(header.length);
    } else {
      const queue = this.queue(header.tag);
      const posted = queue.posted.shift();
      if (posted === undefined) {
        inbound.staged = this.stagingFor(header.length);
        queue.arrived.push(inbound);
      } else {
        this.release(header.tag, queue);
        if (posted.into.byteLength === header.length) inbound.recv = posted;
        else {
          posted.op.reject(this.mismatch(header.tag, posted.into.byteLength, header.length));
          inbound.dropped = true;
        }
      }
    }
    this.cur = inbound;
    this.advance(inbound, 0);
  }

  /** The reused buffer's first `length` bytes (a payload past the kept size gets its own). */
  private controlPayload(length: number): Uint8Array {
    if (length > kControlKeptBytes) return new Uint8Array(length);
    if (length > this.controlBytes.byteLength)
      this.controlBytes = new Uint8Array(Math.max(length, 2 * this.controlBytes.byteLength));
    return this.controlBytes.subarray(0, length);
  }

  /** Counts `n` more bytes of the current payload and completes it when whole. */
  private advance(cur: Inbound, n: number): void {
    cur.received += n;
    if (cur.recv !== null) cur.recv.op.lastProgress = this.lastReadAt; // only reads advance
    if (cur.received < cur.length) return;
    this.cur = null;
    if (cur.link) this.hooks.onLink(cur.tag, cur.staged as Uint8Array);
    else if (cur.shared) this.landShared(cur.tag, cur.staged as Uint8Array);
    else if (cur.control) this.hooks.onControl(cur.staged as Uint8Array);
    else if (cur.recv !== null) cur.recv.op.resolve();
    // An unmatched data message now waits, complete, in its tag's arrived queue.
  }

  /** A shared data frame's descriptor is whole: match it like a data message, then free its slot. */
  private landShared(tag: number, descriptor: Uint8Array): void {
    const lane = this.hooks.shared?.();
    if (lane === undefined) throw new ProtocolError('shared data frame on a link without a shared-memory lane');
    const { slot, length } = decodeDescriptor(descriptor);
    if (length > this.hooks.limits.maxFrameBytes) {
      throw new ProtocolError(
        `shared data message of ${length} bytes (tag ${tag}) exceeds the limit of ${this.hooks.limits.maxFrameBytes}`,
      );
    }
    if (slot >= lane.slots) throw new ProtocolError(`shared data message in slot ${slot} of ${lane.slots}`);
    const queue = this.queue(tag);
    const posted = queue.posted.shift();
    if (posted === undefined) {
      const inbound: Inbound = {
        control: false,
        link: false,
        shared: false,
        tag,
        length,
        received: length,
        staged: null,
        recv: null,
        dropped: false,
        slot,
      };
      // Hold the slot only while the sender keeps one free (see the header); else stage it now.
      if (this.held + lane.owed() >= lane.slots - 1) lane.returnOwed();
      if (this.held + lane.owed() < lane.slots - 1) this.held++;
      else this.unhold(inbound);
      queue.arrived.push(inbound);
      return;
    }
    this.release(tag, queue);
    if (posted.into.byteLength !== length) {
      lane.release(slot);
      posted.op.reject(this.mismatch(tag, posted.into.byteLength, length));
      return;
    }
    lane.read(slot, posted.into);
    lane.release(slot);
    this.stats.sharedBytes += length;
    posted.op.resolve();
  }

  /** A recv takes a message held in its lane slot: one copy, straight into `into`. */
  private claimHeld(inbound: Inbound, tag: number, into: Uint8Array, op: PendingOp): void {
    const lane = this.hooks.shared?.();
    this.held--;
    const slot = inbound.slot;
    inbound.slot = -1;
    if (lane === undefined) {
      op.reject(new ProtocolError(`the shared-memory lane closed before the message with tag ${tag} was taken`));
      return;
    }
    try {
      if (inbound.length !== into.byteLength) {
        op.reject(this.mismatch(tag, into.byteLength, inbound.length));
        return;
      }
      lane.read(slot, into);
      this.stats.sharedBytes += inbound.length;
      op.resolve();
    } catch (error) {
      op.reject(error as Error);
      this.dead = true;
      this.hooks.onViolation(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
    } finally {
      lane.release(slot);
    }
  }

  /** Copies a held message out of its slot into a staging buffer and frees the slot; false if the lane is gone. */
  private unhold(inbound: Inbound): boolean {
    const lane = this.hooks.shared?.();
    const slot = inbound.slot;
    inbound.slot = -1;
    if (lane === undefined) return false;
    const staged = this.stagingFor(inbound.length);
    lane.read(slot, staged);
    lane.release(slot);
    inbound.staged = staged;
    this.stats.stagedBytes += inbound.length;
    return true;
  }

  /** A staging buffer of exactly `length` bytes, pooled when large. */
  private stagingFor(length: number): Uint8Array {
    if (length === 0) return kEmpty;
    const pool = this.hooks.stagingPool;
    if (pool === undefined || length < kPooledStagingMinBytes) return Buffer.allocUnsafe(length);
    const staged = new Uint8Array(pool.acquire(length), 0, length);
    this.pooled.add(staged);
    return staged;
  }

  /** A staging buffer whose bytes were copied out (or dropped): back to the pool if it came from there. */
  private recycle(staged: Uint8Array | null): void {
    if (staged === null || !this.pooled.delete(staged)) return;
    this.hooks.stagingPool?.release(staged.buffer as ArrayBuffer);
  }

  private tryUnhold(inbound: Inbound): boolean {
    try {
      return this.unhold(inbound);
    } catch {
      return false;
    }
  }

  private count(cur: Inbound, n: number, copied: boolean): void {
    if (cur.dropped || cur.control) return;
    if (cur.recv === null) this.stats.stagedBytes += n;
    else if (copied) this.stats.copiedBytes += n;
    else this.stats.zeroCopyBytes += n;
  }

  private queue(tag: number): TagQueue {
    let queue = this.queues.get(tag);
    if (queue === undefined) {
      queue = { arrived: new Fifo(), posted: new Fifo() };
      this.queues.set(tag, queue);
    }
    return queue;
  }

  /** Forgets an empty tag queue, so tags used once do not pile up. */
  private release(tag: number, queue: TagQueue): void {
    if (queue.arrived.length === 0 && queue.posted.length === 0) this.queues.delete(tag);
  }

  private mismatch(tag: number, expected: number, actual: number): ProtocolError {
    return new ProtocolError(
      `message from ${this.hooks.who} with tag ${tag} has ${actual} bytes but the recv expects ${expected}; the message was discarded`,
    );
  }
}
