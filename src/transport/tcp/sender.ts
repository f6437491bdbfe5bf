/**
 * Send path of one peer link.
 *
 * How it works: a frame is its 12-byte header and the caller's payload. A small payload is
 * copied behind the header and written as one buffer (one write, cheaper than a writev of two);
 * a larger one is written corked so Node hands both to one writev (no copy of the payload, which
 * may live in SharedArrayBuffer memory). The op resolves once the kernel has taken every byte and
 * the caller may reuse `data`: at once when the write completed synchronously (the usual case
 * for small frames; it saves the stream's nextTick hop before the callback), else in the write
 * callback. Backpressure: the socket's write queue only holds references to payloads of sends
 * not yet resolved, so the bytes in flight are bounded by what the caller has not awaited.
 * Writes complete in order, so the oldest unresolved op is the one the link is working on:
 * each completion stamps progress on the next one for the watchdog.
 *
 * Shared-memory lane (shm_lane.ts), once the peer accepted it: a data payload that fits is
 * copied into a free slot and only its descriptor goes on the socket. With no slot free, the send
 * waits for the peer's credit, and so does every later data or control send (order per peer);
 * link frames never wait. A lane that fails to write (tmpfs full) is dropped for the socket.
 * The credits this rank owes the peer for the peer's lane (slots it has read) go out with the
 * next frame written to the peer, in the same write, or on their own once the transport flushes
 * them (tcp_transport.ts says when): a credit of its own would wake the peer's thread for nothing.
 */

import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Fifo, type PendingOp } from '../pending_op.js';
import {
  encodeHeader,
  type FrameKind,
  kHeaderBytes,
  kKindData,
  kKindLink,
  kKindSharedData,
  kLinkShmCredit,
  writeU32,
} from './framing.js';
import { encodeDescriptor, type ShmOutbox } from './shm_lane.js';

interface WaitingSend {
  kind: FrameKind;
  tag: number;
  payload: Uint8Array;
  op: PendingOp;
}

/** Payloads up to this size are copied behind their header: a copy this small beats a writev. */
const kCoalesceMaxBytes = 1024;

export class PeerSender {
  /** Unresolved ops in write order; write callbacks run in that order too. */
  private readonly inflight = new Fifo<PendingOp>();
  /** Write callbacks still to come for ops already resolved (their bytes were taken at once). */
  private early = 0;
  private readonly written = (error?: Error | null) => this.done(error);
  private lane: ShmOutbox | undefined;
  /** Sends behind one that waits for a free slot of the lane, in call order. */
  private readonly waiting = new Fifo<WaitingSend>();
  private waitingBytes = 0;
  /** Slots of the peer's lane read here and not handed back yet (see owe). */
  private readonly owed: number[] = [];

  constructor(
    private readonly socket: net.Socket,
    private readonly onWriteError: (error: Error) => void,
    /** The lane failed to write (tmpfs full or gone) and was dropped for the socket. */
    private readonly onLaneLost: (error: unknown) => void = () => {},
  ) {}

  /** The peer accepted the lane: data payloads that fit go through it from now on. */
  useLane(lane: ShmOutbox): void {
    this.lane = lane;
  }

  /** Whether data payloads that fit currently go through the shared-memory lane. */
  get usesLane(): boolean {
    return this.lane !== undefined;
  }

  send(kind: FrameKind, tag: number, payload: Uint8Array, op: PendingOp): void {
    if (this.waiting.length > 0 || !this.trySend(kind, tag, payload, op)) {
      this.waiting.push({ kind, tag, payload, op });
      this.waitingBytes += payload.byteLength;
    }
  }

  /** This rank has read `slot` of the peer's lane: it goes back with the next frame to the peer, or with flushCredits. */
  owe(slot: number): void {
    this.owed.push(slot);
  }

  /** Slots owed to the peer and not sent yet. */
  get owedCredits(): number {
    return this.owed.length;
  }

  /** Hands every owed slot back now, in a frame of its own. */
  flushCredits(): void {
    if (this.owed.length === 0 || this.socket.destroyed || this.socket.writableEnded) return;
    this.socket.write(this.afterCredits(0));
  }

  /**
   * A buffer for a frame of `bytes` (header included) with the owed slots' credit frame written
   * before it, so both go in one write; the frame starts at `buffer.byteLength - bytes`. Owes
   * nothing more.
   */
  private afterCredits(bytes: number): Buffer {
    const owed = this.owed.length;
    if (owed === 0) return Buffer.allocUnsafe(bytes);
    const buffer = Buffer.allocUnsafe(kHeaderBytes + 4 * owed + bytes);
    encodeHeader(kKindLink, kLinkShmCredit, 4 * owed, buffer);
    for (let i = 0; i < owed; i++) writeU32(buffer, kHeaderBytes + 4 * i, this.owed[i] as number);
    this.owed.length = 0;
    return buffer;
  }

  /** The peer handed lane slots back: sends that waited for one go out now. */
  credit(slots: readonly number[]): void {
    const lane = this.lane;
    if (lane === undefined) return;
    for (const slot of slots) lane.release(slot);
    const head = this.waiting.peek();
    if (head !== undefined) head.op.lastProgress = performance.now();
    for (let next = this.waiting.peek(); next !== undefined; next = this.waiting.peek()) {
      if (next.op.done) {
        this.dropWaiting();
        continue;
      }
      if (!this.trySend(next.kind, next.tag, next.payload, next.op)) break;
      this.dropWaiting();
    }
  }

  private dropWaiting(): void {
    this.waitingBytes -= (this.waiting.shift() as WaitingSend).payload.byteLength;
  }

  /** Writes the frame, through the lane when it fits; false when it must wait for a slot. */
  private trySend(kind: FrameKind, tag: number, payload: Uint8Array, op: PendingOp): boolean {
    const lane = this.lane;
    if (kind === kKindData && lane?.fits(payload.byteLength)) {
      const slot = lane.acquire();
      if (slot === undefined) return false;
      try {
        lane.write(slot, payload);
      } catch (error) {
        // tmpfs full or gone: this and every later message take the socket.
        lane.release(slot);
        this.lane = undefined;
        lane.close();
        this.onLaneLost(error);
        this.write(kind, tag, payload, op);
        return true;
      }
      this.write(kKindSharedData, tag, encodeDescriptor(slot, payload.byteLength), op);
      return true;
    }
    this.write(kind, tag, payload, op);
    return true;
  }

  private write(kind: FrameKind, tag: number, payload: Uint8Array, op: PendingOp): void {
    const length = payload.byteLength;
    if (this.inflight.length === 0) op.lastProgress = performance.now();
    this.inflight.push(op);
    if (length <= kCoalesceMaxBytes) {
      const frame = this.afterCredits(kHeaderBytes + length);
      const at = frame.byteLength - kHeaderBytes - length;
      encodeHeader(kind, tag, length, frame, at);
      if (length > 0) frame.set(payload, at + kHeaderBytes);
      this.socket.write(frame, this.written);
    } else {
      const header = this.afterCredits(kHeaderBytes);
      encodeHeader(kind, tag, length, header, header.byteLength - kHeaderBytes);
      this.socket.cork();
      this.socket.write(header);
      this.socket.write(payload, this.written);
      this.socket.uncork();
    }
    // Nothing left in Node's queue: the kernel has every byte written so far, so every
    // unresolved send is complete; their callbacks, still to come, are then skipped.
    // (A write that failed at once also leaves the queue empty, but marks the socket errored.)
    if (this.socket.writableLength === 0 && !this.socket.errored && !this.socket.destroyed) {
      for (let done = this.inflight.shift(); done !== undefined; done = this.inflight.shift()) {
        this.early++;
        done.resolve();
      }
    }
  }

  /**
   * Writes a link frame of the transport itself (heartbeat, notice, goodbye): no op, no
   * completion; a write error shows up on the socket like any other.
   */
  sendLink(message: number, payload: Uint8Array = new Uint8Array(0)): void {
    if (this.socket.destroyed || this.socket.writableEnded) return;
    const frame = this.afterCredits(kHeaderBytes + payload.byteLength);
    const at = frame.byteLength - kHeaderBytes - payload.byteLength;
    encodeHeader(kKindLink, message, payload.byteLength, frame, at);
    frame.set(payload, at + kHeaderBytes);
    this.socket.write(frame);
  }

  /** Bytes handed to the socket that the kernel has not taken yet, and sends waiting for a lane slot. */
  get backlog(): number {
    return this.socket.writableLength + this.waitingBytes;
  }

  /** Rejects every unresolved send. */
  fail(error: Error): void {
    for (const send of this.waiting.drain()) send.op.reject(error);
    this.waitingBytes = 0;
    for (const op of this.inflight.drain()) {
      op.reject(error);
      this.early++; // its callback may still come
    }
  }

  private done(error: Error | null | undefined): void {
    if (this.early > 0) {
      this.early--; // resolved at once, or failed: nothing left to do
      return;
    }
    const op = this.inflight.peek();
    if (op === undefined) return;
    if (error) {
      this.onWriteError(error); // fails the link, which rejects `op` with a PeerFailureError
      op.reject(error);
      return;
    }
    this.inflight.shift();
    op.resolve();
    const next = this.inflight.peek();
    if (next !== undefined) next.lastProgress = performance.now();
  }
}
