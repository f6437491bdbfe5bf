/**
 * The message channel of a web job (the web backend's links, transport/web/, and the store for
 * browsers, web_store_client.ts), as ringreduce sees it: the few members that a browser's
 * `WebSocket`, the `ws` package's `WebSocket` (Node) and an `RTCDataChannel` all have. The type
 * is structural and names no DOM type, so it compiles with or without the DOM lib. No Node
 * import: it runs in a page.
 *
 * A channel carries whole binary messages, reliably and in order (a data channel must be
 * opened ordered, without maxRetransmits or maxPacketLifeTime). `bufferedAmount` counts the
 * bytes handed to `send` and not yet transmitted: the sender's flow control (sender.ts).
 *
 * ChannelPort subscribes to a channel's events once, as soon as the channel exists (events
 * fired before anyone listens are lost), and routes them: to the handshake, which reads one
 * message at a time with a deadline, then to its user (the transport's receiver, the store client), which gets the messages
 * that arrived in between first.
 */
import { TimeoutError } from '../core/errors.js';

/** A message channel: WebSocket (browser or ws) or RTCDataChannel. */
export interface ChannelLike {
  /** Set to 'arraybuffer' by the backend unless the channel already hands out bytes ('nodebuffer' in ws). */
  binaryType: string;
  /** WebSocket: 0 connecting, 1 open, 2 closing, 3 closed; RTCDataChannel: 'connecting', 'open', 'closing', 'closed'. */
  readonly readyState: number | string;
  readonly bufferedAmount: number;
  /** Browsers refuse views of a SharedArrayBuffer, hence the type; ChannelTraits says where they are taken. */
  send(data: ArrayBufferView<ArrayBuffer> | ArrayBuffer): void;
  close(): void;
  addEventListener(type: 'open', listener: (event: unknown) => void): void;
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
  addEventListener(type: 'close', listener: (event: { code?: number; reason?: string }) => void): void;
  addEventListener(type: 'error', listener: (event: unknown) => void): void;
}

/** What an RTCDataChannel has beyond ChannelLike: an event when bufferedAmount falls to a threshold. */
export interface LowWaterEvent {
  bufferedAmountLowThreshold: number;
  addEventListener(type: 'bufferedamountlow', listener: (event: unknown) => void): void;
}

export function hasLowWaterEvent(channel: ChannelLike): channel is ChannelLike & LowWaterEvent {
  return typeof (channel as unknown as Partial<LowWaterEvent>).bufferedAmountLowThreshold === 'number';
}

/**
 * How the `send` of the channels one side opens treats the bytes it is given. Both are facts of
 * the implementation, not of the protocol, so the openers that make the channels state them.
 */
export interface ChannelTraits {
  /**
   * `send` accepts a view of a SharedArrayBuffer. ws in Node does; browsers' WebSocket and
   * RTCDataChannel throw a TypeError, so the sender copies such views into a staging buffer
   * first. Default false.
   */
  readonly sendsSharedViews: boolean;
  /**
   * `send` may keep a reference to the bytes until they are transmitted (ws in Node frames an
   * unmasked message without copying it), so a send resolves only once `bufferedAmount` shows
   * them gone. Browsers copy in `send`, so theirs resolves at once. Default true (safe).
   */
  readonly retainsSentBytes: boolean;
  /**
   * `send(data, callback)` calls back once the bytes are written (ws in Node: when its socket
   * write completes). A sender then resolves its sends, and resumes after a pause, at that
   * moment rather than at a timer. Browsers' `send` takes no callback. Default false.
   */
  readonly sendCallback: boolean;
}

export const kDefaultTraits: ChannelTraits = { sendsSharedViews: false, retainsSentBytes: true, sendCallback: false };

/** ChannelLike's `send` where ChannelTraits.sendCallback says it calls back. */
export type SendWithCallback = (data: ArrayBufferView<ArrayBuffer> | ArrayBuffer, callback: (error?: Error) => void) => void;

export function isOpen(channel: ChannelLike): boolean {
  return channel.readyState === 1 || channel.readyState === 'open';
}

export function isClosing(channel: ChannelLike): boolean {
  const state = channel.readyState;
  return state === 2 || state === 3 || state === 'closing' || state === 'closed';
}

/** The bytes of a message event's data, or null when it is not binary (a text frame, a Blob). */
export function bytesOfMessage(data: unknown): Uint8Array | null {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/** Resolves once `channel` is open; rejects when it closes first or at `deadline` (performance.now() clock). */
export function whenOpen(channel: ChannelLike, deadline: number, what: string): Promise<void> {
  if (isOpen(channel)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(
      () => settle(new TimeoutError(`${what} did not open in time`)),
      Math.max(0, Math.ceil(deadline - performance.now())),
    );
    channel.addEventListener('open', () => settle());
    channel.addEventListener('close', (event) => settle(new Error(`${what} closed before it opened${closeDetail(event)}`)));
    channel.addEventListener('error', (event) => settle(new Error(`${what} failed to open${errorDetail(event)}`)));
  });
}

/** ": code 1006 (reason)" from a close event, or "". */
export function closeDetail(event: { code?: number; reason?: string } | undefined): string {
  if (event?.code === undefined) return '';
  return `: code ${event.code}${event.reason ? ` (${event.reason})` : ''}`;
}

/** ": message" from an error event (ws's ErrorEvent has one; a browser's has none), or "". */
export function errorDetail(event: unknown): string {
  const message = (event as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message !== '' ? `: ${message}` : '';
}

/** Where a ChannelPort routes a channel's messages once the handshake is over. */
export interface PortSink {
  /** One whole message; `null` when it was not binary (a protocol violation). */
  message(bytes: Uint8Array | null): void;
  /** The channel closed or failed (after every message it delivered). */
  closed(cause: string): void;
}

/** Owns a channel's event subscriptions for its whole life (see the header). */
export class ChannelPort {
  private readonly queued: (Uint8Array | null)[] = [];
  private closedCause: string | null = null;
  private sink: PortSink | null = null;
  private wake: (() => void) | null = null;
  private readonly closeWaiters: (() => void)[] = [];

  constructor(readonly channel: ChannelLike) {
    if (channel.binaryType === 'blob') channel.binaryType = 'arraybuffer';
    channel.addEventListener('message', (event) => this.onMessage(bytesOfMessage(event.data)));
    channel.addEventListener('close', (event) => this.onClosed(`connection closed${closeDetail(event)}`));
    channel.addEventListener('error', (event) => this.onClosed(`connection failed${errorDetail(event)}`));
  }

  /** Whether the channel has closed (its messages may still be queued). */
  get closed(): boolean {
    return this.closedCause !== null;
  }

  /**
   * The next message, for the handshake. Rejects with `onClose(cause)` when the channel closes
   * first, with TimeoutError from `onTimeout` at `deadline` (performance.now() clock).
   */
  next(deadline: number, onTimeout: () => Error, onClose: (cause: string) => Error): Promise<Uint8Array | null> {
    return new Promise((resolve, reject) => {
      const take = (): boolean => {
        if (this.queued.length > 0) {
          resolve(this.queued.shift() as Uint8Array | null);
          return true;
        }
        if (this.closedCause !== null) {
          reject(onClose(this.closedCause));
          return true;
        }
        return false;
      };
      if (take()) return;
      const timer = setTimeout(
        () => {
          this.wake = null;
          reject(onTimeout());
        },
        Math.max(0, Math.ceil(deadline - performance.now())),
      );
      this.wake = () => {
        if (!take()) return;
        this.wake = null;
        clearTimeout(timer);
      };
    });
  }

  /** Resolves once the channel has closed, or after `ms`. */
  whenClosed(ms: number): Promise<void> {
    if (this.closedCause !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.closeWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Routes every message to `sink` from now on: first those queued, then a close seen meanwhile. */
  attach(sink: PortSink): void {
    this.sink = sink;
    this.wake = null;
    for (const bytes of this.queued.splice(0)) sink.message(bytes);
    if (this.closedCause !== null) sink.closed(this.closedCause);
  }

  private onMessage(bytes: Uint8Array | null): void {
    if (this.closedCause !== null) return;
    if (this.sink) this.sink.message(bytes);
    else {
      this.queued.push(bytes);
      this.wake?.();
    }
  }

  private onClosed(cause: string): void {
    if (this.closedCause !== null) return;
    this.closedCause = cause;
    for (const waiter of this.closeWaiters.splice(0)) waiter();
    if (this.sink) this.sink.closed(cause);
    else this.wake?.();
  }
}
