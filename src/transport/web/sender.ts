/**
 * Send path of one web link (framing.ts for the frames, rendezvous/channel.ts for the channel).
 *
 * How it works: data and control messages wait in one queue, in call order, and go out one at a
 * time: a small payload as one inline frame (header and a copy of the payload), a larger one as
 * its header and then raw chunks of at most the link's chunk size, views of the caller's bytes
 * (no copy). Nothing else goes between the chunks of a message, so link frames (pings,
 * heartbeats, notices, the goodbye) wait for the next message boundary, then go ahead of the
 * queued messages.
 *
 * Flow control: before each header or chunk, the sender looks at the channel's bufferedAmount
 * (bytes handed to send and not yet transmitted). At or above the link's high-water mark it
 * stops, and goes on when the channel drains: at the channel's 'bufferedamountlow' event where
 * it has one (RTCDataChannel; the threshold is a quarter of the high-water mark), at the callback
 * of a completed write where send has one (ws in Node), else at a short timer (a browser's
 * WebSocket has neither). The memory a link holds is therefore bounded by
 * the high-water mark and one chunk, whatever the caller sends; a peer that stops reading stops
 * the sends, and their deadline (../watchdog.ts) names it.
 *
 * When a send resolves (ChannelTraits, rendezvous/channel.ts): where `send` copies (browsers),
 * once its last byte was handed over; where it keeps a reference to the bytes (ws in Node), once
 * they are written (the write's callback), or else once bufferedAmount shows them transmitted,
 * so the caller may then reuse its buffer. Views of a
 * SharedArrayBuffer go through a reusable staging buffer of one chunk when the channel refuses
 * them (browsers), copied chunk by chunk.
 */

import {
  type ChannelLike,
  type ChannelTraits,
  hasLowWaterEvent,
  isClosing,
  type SendWithCallback,
} from '../../rendezvous/channel.js';
import { Fifo, type PendingOp } from '../pending_op.js';
import { encodeHeader, type FrameKind, inlineFrame, kHeaderBytes, kInlineMaxBytes, kKindLink } from './framing.js';

export interface SenderOptions {
  channel: ChannelLike;
  /** Largest raw chunk: 64 KiB on a data channel, 1 MiB on a WebSocket, 256 KiB on a browser's (mesh.ts). */
  chunkBytes: number;
  /** bufferedAmount at which sending pauses. */
  highWaterBytes: number;
  traits: ChannelTraits;
  /** How soon to look at bufferedAmount again where the channel has no low-water event. */
  pollMs: number;
  /** `send` threw: the link is broken. */
  onError(error: Error): void;
}

interface Outgoing {
  kind: FrameKind;
  tag: number;
  payload: Uint8Array;
  op: PendingOp;
  /** Payload bytes handed to the channel so far (chunked messages). */
  offset: number;
  /** Every chunk went out as a copy: the caller's bytes are free once the last one is handed over. */
  copied: boolean;
}

interface Draining {
  op: PendingOp;
  /** The send is transmitted once this many bytes (of all handed over) have left the channel. */
  mark: number;
}

const kEmpty = new Uint8Array(0);

function isShared(view: Uint8Array): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && view.buffer instanceof SharedArrayBuffer;
}

export class WebSender {
  private readonly queue = new Fifo<Outgoing>();
  private readonly links: Uint8Array[] = [];
  private cur: Outgoing | null = null;
  /** Payload bytes queued or still to be chunked: the backlog beyond bufferedAmount. */
  private pendingBytes = 0;
  /** Bytes handed to channel.send in all; minus bufferedAmount, the bytes transmitted. */
  private handed = 0;
  private lastTransmitted = 0;
  private readonly draining = new Fifo<Draining>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private staging: Uint8Array | null = null;
  private failure: Error | null = null;
  private pumping = false;
  private readonly channel: ChannelLike;
  private readonly lowWaterEvent: boolean;

  constructor(private readonly options: SenderOptions) {
    this.channel = options.channel;
    const channel = this.channel;
    this.lowWaterEvent = hasLowWaterEvent(channel);
    if (hasLowWaterEvent(channel)) {
      channel.bufferedAmountLowThreshold = Math.floor(options.highWaterBytes / 4);
      channel.addEventListener('bufferedamountlow', () => this.pump());
    }
  }

  /** Queues a data or control message; `op` resolves as the header says. */
  send(kind: FrameKind, tag: number, payload: Uint8Array, op: PendingOp): void {
    if (this.failure) {
      op.reject(this.failure);
      return;
    }
    this.queue.push({ kind, tag, payload, op, offset: 0, copied: false });
    this.pendingBytes += payload.byteLength;
    this.pump();
  }

  /** A link frame of the transport itself: no op; it goes at the next message boundary. */
  sendLink(message: number, payload: Uint8Array = kEmpty): void {
    if (this.failure) return;
    this.links.push(inlineFrame(kKindLink, message, payload));
    if (this.cur === null) this.flushLinks();
  }

  /** Bytes not yet transmitted: in the channel's buffer, or still queued here. */
  get backlog(): number {
    return this.channel.bufferedAmount + this.pendingBytes;
  }

  /** Whether everything handed over has been transmitted and nothing waits. */
  get idle(): boolean {
    return this.cur === null && this.queue.length === 0 && this.links.length === 0 && this.channel.bufferedAmount === 0;
  }

  /** Rejects every unresolved send and sends nothing more (the channel is gone or being dropped). */
  fail(error: Error): void {
    this.failure ??= error;
    this.rejectAll(error);
    this.cur = null;
    this.links.length = 0;
    this.stopTimer();
  }

  /**
   * Winding down (the transport closes, or shared fate broke it while this channel still works):
   * rejects every unresolved send and drops the queued ones, but lets the message in progress
   * finish its chunks (the peer would otherwise read what follows as its payload), so that link
   * frames sent next, a goodbye or a failure notice, reach the peer whole.
   */
  close(error: Error): void {
    this.rejectAll(error);
  }

  /** Resolves once idle (see `idle`), or the channel is closing (nothing more leaves), or after `ms`. */
  async flushed(ms: number): Promise<void> {
    const until = performance.now() + ms;
    while (!this.idle && !this.failure && !isClosing(this.channel) && performance.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, this.options.pollMs));
      this.pump();
    }
  }

  private rejectAll(error: Error): void {
    this.cur?.op.reject(error);
    for (const item of this.queue.drain()) item.op.reject(error);
    for (const waiting of this.draining.drain()) waiting.op.reject(error);
    this.pendingBytes = this.cur === null ? 0 : this.cur.payload.byteLength - this.cur.offset;
  }

  /** Sends what flow control allows; called on every change (a send, a drain, a timer). */
  private pump(): void {
    if (this.pumping || this.failure) return;
    this.pumping = true;
    try {
      this.checkTransmitted();
      while (this.failure === null) {
        const cur = this.cur;
        if (cur === null) {
          this.flushLinks();
          const next = this.queue.peek();
          if (next === undefined) break;
          if (this.full()) break;
          this.queue.shift();
          this.start(next);
        } else {
          if (this.full()) break;
          this.sendChunk(cur);
        }
      }
    } finally {
      this.pumping = false;
    }
    this.armTimer();
  }

  private full(): boolean {
    return this.channel.bufferedAmount >= this.options.highWaterBytes;
  }

  private start(item: Outgoing): void {
    const length = item.payload.byteLength;
    if (length <= kInlineMaxBytes) {
      this.pendingBytes -= length;
      item.op.lastProgress = performance.now();
      if (this.transmit(inlineFrame(item.kind, item.tag, item.payload))) item.op.resolve(); // a copy went out
      return;
    }
    const header = new Uint8Array(kHeaderBytes);
    encodeHeader(item.kind, item.tag, length, header);
    if (!this.transmit(header)) return;
    item.copied = isShared(item.payload) && !this.options.traits.sendsSharedViews;
    this.cur = item;
  }

  private sendChunk(item: Outgoing): void {
    const { traits } = this.options;
    const n = Math.min(this.options.chunkBytes, item.payload.byteLength - item.offset);
    const last = item.offset + n === item.payload.byteLength;
    let chunk = item.payload.subarray(item.offset, item.offset + n);
    if (item.copied) chunk = this.copyOf(chunk);
    // The caller's bytes are free once the channel has them: at once where it copies, else once written.
    const waitsForWrite = last && !item.copied && traits.retainsSentBytes;
    const written = waitsForWrite && traits.sendCallback ? () => item.op.resolve() : undefined;
    if (!this.transmit(chunk, written)) return;
    item.offset += n;
    this.pendingBytes -= n;
    item.op.lastProgress = performance.now();
    if (!last) return;
    this.cur = null;
    if (!waitsForWrite) item.op.resolve();
    else if (written === undefined && !item.op.done) {
      this.draining.push({ op: item.op, mark: this.handed });
      this.checkTransmitted();
    }
  }

  /** `chunk` copied out of shared memory: into the reusable staging buffer where send copies anyway. */
  private copyOf(chunk: Uint8Array): Uint8Array {
    if (this.options.traits.retainsSentBytes) return chunk.slice();
    this.staging ??= new Uint8Array(this.options.chunkBytes);
    const out = this.staging.subarray(0, chunk.byteLength);
    out.set(chunk);
    return out;
  }

  private flushLinks(): void {
    for (const frame of this.links.splice(0)) if (!this.transmit(frame)) return;
  }

  /**
   * Hands `bytes` to the channel; false (and the link failed) when send throws. A view of shared
   * memory reaches here only where the traits say the channel takes one (the type says browsers'
   * do not).
   */
  private transmit(bytes: Uint8Array, written?: () => void): boolean {
    const channel = this.options.channel;
    try {
      if (!this.options.traits.sendCallback) channel.send(bytes as Uint8Array<ArrayBuffer>);
      else {
        // Every write calls back, so a paused sender always has one to resume at.
        (channel.send as SendWithCallback).call(channel, bytes as Uint8Array<ArrayBuffer>, (error) => {
          if (error === undefined || error === null) written?.();
          this.pump();
        });
      }
    } catch (error) {
      this.options.onError(error as Error);
      return false;
    }
    this.handed += bytes.byteLength;
    return true;
  }

  /** Resolves the sends whose bytes have left the channel, and stamps progress on the next. */
  private checkTransmitted(): void {
    const transmitted = this.handed - this.channel.bufferedAmount;
    for (let head = this.draining.peek(); head !== undefined && head.mark <= transmitted; head = this.draining.peek()) {
      this.draining.shift();
      head.op.resolve();
    }
    if (transmitted > this.lastTransmitted) {
      this.lastTransmitted = transmitted;
      const head = this.draining.peek();
      if (head) head.op.lastProgress = performance.now();
    }
  }

  /** A timer while sends wait for a drain that no event announces. */
  private armTimer(): void {
    const waitingForSpace = this.cur !== null || this.queue.length > 0;
    const announced = this.lowWaterEvent || this.options.traits.sendCallback;
    const wanted = this.draining.length > 0 || (waitingForSpace && !announced);
    if (!wanted || this.timer !== null || this.failure) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump();
    }, this.options.pollMs);
  }

  private stopTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
