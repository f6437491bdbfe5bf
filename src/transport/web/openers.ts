/**
 * LinkOpeners: what the web backend is built from, so that the same backend runs in Node and in
 * a browser's engine worker. Each side supplies the ways it can open channels:
 *
 *   - Node ranks (node_openers.ts): a WebSocket listener (`listen`), a dialer over the `ws`
 *     package, and the TCP store client for RINGREDUCE_STORE_ADDR (`connectStore`).
 *   - Browser ranks (browser_openers.ts): the global WebSocket as the dialer, and an
 *     RTCDataChannel opener that the page supplies (`dataChannel`).
 *
 * mesh.ts decides per pair of ranks which of them is used (its header has the rule).
 */

import type { ChannelLike, ChannelTraits } from '../../rendezvous/channel.js';
import type { Store, StoreAddress } from '../../rendezvous/store.js';

/** A listening WebSocket server of this rank. */
export interface LinkListener {
  /** ws://host:port that the other ranks dial; published in the store. */
  readonly url: string;
  /**
   * Calls `cb` with every accepted channel (already open) and a description of where it came
   * from ("10.0.0.3:51234"), in the same task as the connection: its messages must not have
   * fired yet. Connections accepted before the callback is set are closed (nobody had the URL).
   */
  onChannel(cb: (channel: ChannelLike, remote: string) => void): void;
  /** Stops accepting; the channels accepted so far stay open. */
  close(): Promise<void>;
}

/**
 * The signalling of one data channel between two ranks, carried by the store: messages of a
 * kind ("offer", "answer", "candidate", ...) arrive in the order they were sent.
 */
export interface Signal {
  send(kind: string, text: string): Promise<void>;
  /** The next message of `kind` from the peer; rejects with TimeoutError after `timeoutMs`. */
  receive(kind: string, timeoutMs: number): Promise<string>;
}

export interface LinkOpeners {
  /** Node ranks: listens on `host` (also the host of the URL). Absent: this rank publishes no URL, and dials. */
  listen?(host: string): Promise<LinkListener>;
  /** A WebSocket to `url` (ws in Node, the global one in a browser); it may still be connecting. */
  dial(url: string): ChannelLike;
  /**
   * Browser ranks: an RTCDataChannel to `peer`, negotiated through `signal`; `offerer` is true
   * on the lower rank. It must be ordered and reliable, and its message events must not have
   * fired before the promise resolves (resolve in the task of its 'open' event, or before).
   */
  dataChannel?(peer: number, offerer: boolean, signal: Signal): Promise<ChannelLike>;
  /** Node ranks: the TCP store at `address` (RINGREDUCE_STORE_ADDR), authenticated with `secret`. */
  connectStore?(
    address: StoreAddress,
    secret: string | undefined,
    timeoutMs: number,
  ): Promise<Store & { localAddress?: string | undefined }>;
  /** How the channels these openers make treat the bytes given to send (rendezvous/channel.ts); default kDefaultTraits. */
  traits?: Partial<ChannelTraits>;
  /** The chunk size and high-water mark of the WebSockets this rank dials (sender.ts); default mesh.ts's kWebSocketLink. */
  webSocketLink?: LinkSizes;
}

/** How a link's sender cuts and paces what it sends (sender.ts). */
export interface LinkSizes {
  readonly chunkBytes: number;
  readonly highWaterBytes: number;
}
