/**
 * Receive path of one web link: whole channel messages in (ChannelPort, rendezvous/channel.ts), frames
 * (framing.ts) matched with receives.
 *
 * How it works. A channel message is either a frame header (with its payload inline, or alone
 * when raw chunks follow) or the next chunk of the message in progress. Matching is FIFO per
 * tag: a data header takes the oldest posted recv of its tag, and its bytes are copied straight
 * into that recv's `into` as each chunk arrives; with no recv posted, it queues as "arrived"
 * with a staging buffer of its exact length. A recv posted later takes the oldest arrived
 * message: copies what is there and, if the message is still arriving, has the rest land in
 * `into` directly. A length mismatch rejects that recv with ProtocolError and discards the
 * message; the link stays up. Control payloads are collected in a fresh buffer for onControl.
 * Every byte is copied once, out of the channel's message into its destination: a message
 * channel hands out bytes it owns, so there is no zero-copy receive as on a socket.
 */
import type { BufferPool } from '../../core/buffer_pool.js';
import { ProtocolError } from '../../core/errors.js';
import { Fifo, type PendingOp } from '../pending_op.js';
import { decodeHeader, type FrameHeader, type FrameLimits, kHeaderBytes, kKindControl, kKindLink } from './framing.js';

/** Staging buffers from this size up come from the pool. */
const kPooledStagingMinBytes = 64 * 1024;
const kEmpty = new Uint8Array(0);

interface PostedRecv {
  into: Uint8Array;
  op: PendingOp;
}

interface Inbound {
  control: boolean;
  tag: number;
  length: number;
  received: number;
  /** Where bytes go while no recv has taken the message (null once taken or dropped). */
  staged: Uint8Array | null;
  recv: PostedRecv | null;
  /** Its recv was refused for a length mismatch: bytes are read and discarded. */
  dropped: boolean;
}

interface TagQueue {
  arrived: Fifo<Inbound>;
  posted: Fifo<PostedRecv>;
}

export interface WebReceiverHooks {
  limits: FrameLimits;
  /** Names the link in error messages: "rank 2 (ws://10.0.0.2:4711)". */
  who: string;
  onControl(payload: Uint8Array): void;
  /** A link frame of the transport itself: its message and payload. */
  onLink(message: number, payload: Uint8Array): void;
  /** A malformed frame: the link is broken. */
  onViolation(error: ProtocolError): void;
  /** Where staging buffers of large unmatched messages come from, and go back to once copied out. */
  stagingPool?: BufferPool;
}

/** Where received data payload bytes went: copied into a posted recv's `into`, or staged for a recv not yet posted. */
export interface WebReceiveStats {
  directBytes: number;
  stagedBytes: number;
}

export class WebReceiver {
  readonly stats: WebReceiveStats = { directBytes: 0, stagedBytes: 0 };
  /** performance.now() of the last message: liveness (the peer was heard) and op progress. */
  lastHeardAt = performance.now();
  /** The chunked message whose raw chunks are coming. */
  private cur: Inbound | null = null;
  private readonly queues = new Map<number, TagQueue>();
  private dead = false;
  private failure: Error | null = null;
  private readonly pooled = new WeakSet<Uint8Array>();

  constructor(private readonly hooks: WebReceiverHooks) {}

  /** One channel message; `null` when it was not binary. */
  message(bytes: Uint8Array | null): void {
    if (this.dead) return;
    this.lastHeardAt = performance.now();
    try {
      if (bytes === null) throw new ProtocolError('sent a text message; this link carries binary frames only');
      if (this.cur !== null) this.chunk(this.cur, bytes);
      else this.frame(bytes);
    } catch (error) {
      this.dead = true;
      this.hooks.onViolation(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
    }
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
    const staged = inbound.staged as Uint8Array;
    inbound.staged = null;
    if (inbound.length !== into.byteLength) {
      op.reject(this.mismatch(tag, into.byteLength, inbound.length));
      this.recycle(staged);
      inbound.dropped = true;
      return;
    }
    into.set(staged.subarray(0, inbound.received));
    this.recycle(staged);
    if (inbound.received === inbound.length) {
      op.resolve();
      return;
    }
    // Still arriving (it is this.cur): the rest lands in `into` directly.
    inbound.recv = { into, op };
  }

  /**
   * Stops receiving and rejects every waiting recv. Messages that arrived whole stay claimable:
   * a peer that sends its last message and leaves at once must not lose it. Idempotent.
   */
  fail(error: Error): void {
    this.dead = true;
    this.failure ??= error;
    this.cur?.recv?.op.reject(error);
    this.cur = null;
    for (const [tag, queue] of this.queues) {
      for (const posted of queue.posted.drain()) posted.op.reject(error);
      const whole = new Fifo<Inbound>();
      for (const inbound of queue.arrived.drain()) if (inbound.received === inbound.length) whole.push(inbound);
      if (whole.length === 0) this.queues.delete(tag);
      else queue.arrived = whole;
    }
  }

  private frame(bytes: Uint8Array): void {
    const header = decodeHeader(bytes, this.hooks.limits);
    const inline = bytes.byteLength > kHeaderBytes;
    if (inline && bytes.byteLength !== kHeaderBytes + header.length) {
      throw new ProtocolError(`frame of ${bytes.byteLength} bytes for a payload of ${header.length}`);
    }
    if (header.kind === kKindLink) {
      this.hooks.onLink(header.tag, bytes.slice(kHeaderBytes));
      return;
    }
    const inbound = this.begin(header);
    if (inline) this.land(inbound, bytes.subarray(kHeaderBytes));
    if (inbound.received === inbound.length) this.complete(inbound);
    else this.cur = inbound;
  }

  private chunk(cur: Inbound, bytes: Uint8Array): void {
    const remaining = cur.length - cur.received;
    if (bytes.byteLength === 0 || bytes.byteLength > remaining) {
      throw new ProtocolError(`chunk of ${bytes.byteLength} bytes where ${remaining} of a ${cur.length}-byte message remain`);
    }
    this.land(cur, bytes);
    if (cur.received < cur.length) return;
    this.cur = null;
    this.complete(cur);
  }

  private begin(header: FrameHeader): Inbound {
    const inbound: Inbound = {
      control: header.kind === kKindControl,
      tag: header.tag,
      length: header.length,
      received: 0,
      staged: null,
      recv: null,
      dropped: false,
    };
    if (inbound.control) {
      inbound.staged = new Uint8Array(header.length);
      return inbound;
    }
    const queue = this.queue(header.tag);
    const posted = queue.posted.shift();
    if (posted === undefined) {
      inbound.staged = this.stagingFor(header.length);
      queue.arrived.push(inbound);
      return inbound;
    }
    this.release(header.tag, queue);
    if (posted.into.byteLength === header.length) inbound.recv = posted;
    else {
      posted.op.reject(this.mismatch(header.tag, posted.into.byteLength, header.length));
      inbound.dropped = true;
    }
    return inbound;
  }

  private land(inbound: Inbound, bytes: Uint8Array): void {
    if (!inbound.dropped) {
      const recv = inbound.recv;
      const dest = (recv?.into ?? inbound.staged) as Uint8Array;
      dest.set(bytes, inbound.received);
      if (recv !== null) {
        recv.op.lastProgress = this.lastHeardAt;
        this.stats.directBytes += bytes.byteLength;
      } else if (!inbound.control) this.stats.stagedBytes += bytes.byteLength;
    }
    inbound.received += bytes.byteLength;
  }

  private complete(inbound: Inbound): void {
    if (inbound.control) this.hooks.onControl(inbound.staged as Uint8Array);
    else inbound.recv?.op.resolve();
    // An unmatched data message now waits, complete, in its tag's arrived queue.
  }

  /** A staging buffer of exactly `length` bytes, pooled when large. */
  private stagingFor(length: number): Uint8Array {
    if (length === 0) return kEmpty;
    const pool = this.hooks.stagingPool;
    if (pool === undefined || length < kPooledStagingMinBytes) return new Uint8Array(length);
    const staged = new Uint8Array(pool.acquire(length), 0, length);
    this.pooled.add(staged);
    return staged;
  }

  private recycle(staged: Uint8Array): void {
    if (!this.pooled.delete(staged)) return;
    this.hooks.stagingPool?.release(staged.buffer as ArrayBuffer);
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
