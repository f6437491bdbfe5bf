/**
 * RTCDataChannels for a browser rank's engine, opened by its page.
 *
 * Why the page: a Web Worker has no RTCPeerConnection, but Chromium lets a page hand a data
 * channel to a worker, right after creating it. So the engine worker asks its page for a channel
 * to a peer; the page creates the peer connection and a negotiated channel (id 0, ordered: both
 * sides create it, so neither waits for an `ondatachannel` it could no longer hand over), hands
 * the channel to the engine at once, and runs the offer/answer. The engine carries the page's
 * session descriptions through the job's store (the `signal` of LinkOpeners.dataChannel), since
 * only the engine talks to the store. ICE candidates travel inside the descriptions (the page
 * waits for gathering to complete), so one message each way suffices.
 *
 *   engine → page   open     { id, peer, offerer, iceServers }
 *   page → engine   channel  { id, channel }         (transferred; it opens once connected)
 *   offerer:  page → engine description(offer);  engine → store;  store → engine → page description(answer)
 *   answerer: store → engine → page description(offer);  page → engine description(answer);  engine → store
 *   page → engine   failed   { id, message }
 *   engine → page   closeAll (the engine is shutting down: the page closes its peer connections)
 *
 * This file is the engine's half; src/launcher/browser/page/data_channels.ts is the page's.
 * The channel is handed to the mesh before it can open (the offerer's once the answer is on its
 * way to the page, the answerer's once its answer is made), so no message event fires before
 * the mesh listens (LinkOpeners.dataChannel).
 */
import type { ChannelLike } from '../../rendezvous/channel.js';

/** A STUN or TURN server, as RTCPeerConnection takes it. */
export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

export type EngineToPage =
  | { type: 'ringreduce:rtc-open'; id: number; peer: number; offerer: boolean; iceServers: IceServer[] }
  | { type: 'ringreduce:rtc-description'; id: number; kind: 'offer' | 'answer'; sdp: string }
  | { type: 'ringreduce:rtc-close-all' };

export type PageToEngine =
  | { type: 'ringreduce:rtc-channel'; id: number; channel: unknown }
  | { type: 'ringreduce:rtc-description'; id: number; kind: 'offer' | 'answer'; sdp: string }
  | { type: 'ringreduce:rtc-failed'; id: number; message: string };

/** The page, as the engine worker reaches it (the worker's global scope). */
export interface PagePort {
  postMessage(message: EngineToPage): void;
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
}

/** What the engine's signalling through the store looks like (LinkOpeners.dataChannel's `signal`). */
export interface Signal {
  send(kind: string, text: string): Promise<void>;
  receive(kind: string, timeoutMs: number): Promise<string>;
}

interface Pending {
  channel?: ChannelLike;
  onChannel?: (channel: ChannelLike) => void;
  descriptions: Map<string, string>;
  onDescription?: (kind: string, sdp: string) => void;
  fail?: (error: Error) => void;
}

/**
 * The engine-side opener: `open(peer, offerer, signal, timeoutMs)` resolves with the channel the
 * page made, once the descriptions have been exchanged (the channel then opens by itself).
 */
export class DataChannelRequests {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    private readonly page: PagePort,
    private readonly iceServers: IceServer[] = [],
  ) {
    page.addEventListener('message', (event) => this.onMessage(event.data as PageToEngine));
  }

  async open(peer: number, offerer: boolean, signal: Signal, timeoutMs: number): Promise<ChannelLike> {
    const id = this.nextId++;
    const entry: Pending = { descriptions: new Map() };
    this.pending.set(id, entry);
    const failed = new Promise<never>((_, reject) => {
      entry.fail = reject;
    });
    const channel = new Promise<ChannelLike>((resolve) => {
      if (entry.channel !== undefined) resolve(entry.channel);
      else entry.onChannel = resolve;
    });
    const description = (kind: 'offer' | 'answer') =>
      new Promise<string>((resolve) => {
        const ready = entry.descriptions.get(kind);
        if (ready !== undefined) resolve(ready);
        else entry.onDescription = (k, sdp) => k === kind && resolve(sdp);
      });
    try {
      this.page.postMessage({ type: 'ringreduce:rtc-open', id, peer, offerer, iceServers: this.iceServers });
      const exchange = async () => {
        if (offerer) {
          await signal.send('offer', await description('offer'));
          const answer = await signal.receive('answer', timeoutMs);
          this.page.postMessage({ type: 'ringreduce:rtc-description', id, kind: 'answer', sdp: answer });
        } else {
          const offer = await signal.receive('offer', timeoutMs);
          this.page.postMessage({ type: 'ringreduce:rtc-description', id, kind: 'offer', sdp: offer });
          const answer = await description('answer');
          // Not awaited: the channel cannot open before the offerer has this answer, and the
          // mesh must listen by then. A lost answer shows as the mesh's deadline.
          signal.send('answer', answer).catch(() => {});
        }
        return channel;
      };
      return await Promise.race([exchange(), failed]);
    } finally {
      this.pending.delete(id);
    }
  }

  /** Asks the page to close every peer connection it made for this engine. */
  closeAll(): void {
    this.page.postMessage({ type: 'ringreduce:rtc-close-all' });
  }

  private onMessage(message: PageToEngine): void {
    if (typeof message !== 'object' || message === null) return;
    const entry = 'id' in message ? this.pending.get(message.id) : undefined;
    if (entry === undefined) return;
    if (message.type === 'ringreduce:rtc-channel') {
      const channel = message.channel as ChannelLike;
      channel.binaryType = 'arraybuffer';
      entry.channel = channel;
      entry.onChannel?.(channel);
    } else if (message.type === 'ringreduce:rtc-description') {
      entry.descriptions.set(message.kind, message.sdp);
      entry.onDescription?.(message.kind, message.sdp);
    } else if (message.type === 'ringreduce:rtc-failed') {
      entry.fail?.(new Error(message.message));
    }
  }
}
