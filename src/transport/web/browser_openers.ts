/**
 * The web backend's capabilities in a browser (openers.ts): the global WebSocket as the dialer
 * (a page cannot listen, so a browser rank publishes no URL and dials every Node rank), and the
 * RTCDataChannel opener that the page supplies for links between two browser ranks (the page
 * owns the RTCPeerConnection and its ICE configuration; the store carries the signalling).
 *
 * Browsers copy the bytes in `send` and refuse views of a SharedArrayBuffer (a TypeError): the
 * traits below, so the sender copies shared views into a staging buffer and resolves a send once
 * it has handed over its last chunk.
 */
import type { ChannelLike } from '../../rendezvous/channel.js';
import type { BackendFactory } from '../backend.js';
import { createWebBackend } from './index.js';
import { kBrowserWebSocketLink } from './mesh.js';
import type { LinkOpeners } from './openers.js';

type WebSocketConstructor = new (url: string) => ChannelLike;

/** A browser rank's openers; without `dataChannel`, a job may hold only one browser rank. */
export function browserOpeners(dataChannel?: LinkOpeners['dataChannel']): LinkOpeners {
  return {
    traits: { sendsSharedViews: false, retainsSentBytes: false, sendCallback: false },
    webSocketLink: kBrowserWebSocketLink,
    dial: (url) => {
      const WebSocketClass = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
      if (WebSocketClass === undefined) throw new Error('this environment has no global WebSocket');
      const socket = new WebSocketClass(url);
      socket.binaryType = 'arraybuffer';
      return socket;
    },
    ...(dataChannel === undefined ? {} : { dataChannel }),
  };
}

/** The web backend of a browser rank (its engine worker chooses it for backend 'web'). */
export function browserWebBackend(dataChannel?: LinkOpeners['dataChannel']): BackendFactory {
  return createWebBackend(browserOpeners(dataChannel));
}
