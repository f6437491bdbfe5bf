/**
 * Send path of one peer link.
 *
 * How it works: a frame is its 12-byte header and the caller's payload, written corked so
 * Node hands both to one writev (no copy of the payload, which may live in SharedArrayBuffer
 * memory). The op resolves in the write callback, i.e. once the kernel has taken every byte and
 * the caller may reuse `data`. Backpressure: the socket's write queue only holds references to
 * payloads of sends not yet resolved, so the bytes in flight are bounded by what the caller
 * has not awaited. Writes complete in order, so the oldest unresolved op is the one the link is
 * working on: each completion stamps progress on the next one for the watchdog.
 */

import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import { encodeHeader, type FrameKind, kHeaderBytes, kKindLink } from './framing.js';
import { Fifo, type PendingOp } from './pending_op.js';

export class PeerSender {
  /** Unresolved ops in write order; write callbacks run in that order too. */
  private readonly inflight = new Fifo<PendingOp>();
  /** Frames written so far: the heartbeat only needs to see whether it moved. */
  frames = 0;

  constructor(
    private readonly socket: net.Socket,
    private readonly onWriteError: (error: Error) => void,
  ) {}

  send(kind: FrameKind, tag: number, payload: Uint8Array, op: PendingOp): void {
    const header = Buffer.allocUnsafe(kHeaderBytes);
    encodeHeader(kind, tag, payload.byteLength, header);
    this.frames++;
    if (this.inflight.length === 0) op.lastProgress = performance.now();
    this.inflight.push(op);
    const done = (error?: Error | null) => this.done(op, error);
    if (payload.byteLength === 0) {
      this.socket.write(header, done);
      return;
    }
    this.socket.cork();
    this.socket.write(header);
    this.socket.write(payload, done);
    this.socket.uncork();
  }

  /**
   * Writes a link frame of the transport itself (heartbeat, notice, goodbye): no op, no
   * completion; a write error shows up on the socket like any other.
   */
  sendLink(message: number, payload: Uint8Array = new Uint8Array(0)): void {
    if (this.socket.destroyed || this.socket.writableEnded) return;
    const frame = Buffer.allocUnsafe(kHeaderBytes + payload.byteLength);
    encodeHeader(kKindLink, message, payload.byteLength, frame);
    frame.set(payload, kHeaderBytes);
    this.frames++;
    this.socket.write(frame);
  }

  /** Bytes handed to the socket that the kernel has not taken yet. */
  get backlog(): number {
    return this.socket.writableLength;
  }

  /** Rejects every unresolved send. */
  fail(error: Error): void {
    for (const op of this.inflight.drain()) op.reject(error);
  }

  private done(op: PendingOp, error: Error | null | undefined): void {
    if (this.inflight.peek() !== op) return; // already failed (and drained)
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
