/**
 * The web backend's capabilities in Node (openers.ts): a WebSocket listener and dialer over the
 * `ws` package, and the TCP store client. The only file of the web backend with Node imports;
 * `nodeWebBackend` is the 'web' entry of ../backends.ts.
 *
 * Settings of every WebSocket here: no compression (tensors do not compress, and deflate would
 * copy), ws's own `nodebuffer` messages (no conversion to an ArrayBuffer, which copies),
 * `maxPayload` just above the largest message a link carries (mesh.ts), so a stranger cannot
 * make us buffer more before the handshake refuses it, and a short `closeTimeout`: closing a
 * link to a dead peer must not keep the process alive for ws's default 30 s.
 *
 * A Node rank dials with a zero masking key (ws's `generateMask`). RFC 6455 has clients mask with
 * a random key so that a hostile script in a browser cannot choose the bytes a proxy sees; a
 * Node rank sends tensors, not a stranger's script, and masking costs ws (without the optional
 * `bufferutil` addon) a byte-by-byte JavaScript loop on both ends: 16 MiB took 110 ms instead of
 * 17 ms on loopback. ws skips both loops for a zero key. Browsers always mask (natively), and
 * the Node rank that receives from one unmasks in JavaScript: install `bufferutil` where browser
 * ranks send much.
 *
 * ws's `send` accepts views of SharedArrayBuffer memory (measured: both directions deliver the
 * bytes), and keeps a reference to a payload it does not mask until it is written: the traits
 * below.
 */
import { isIP } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { Config } from '../../core/config.js';
import { interfaceAddress } from '../../rendezvous/addresses.js';
import { JobKey } from '../../rendezvous/auth.js';
import type { ChannelLike } from '../../rendezvous/channel.js';
import { TcpStoreClient } from '../../rendezvous/tcp_store.js';
import type { BackendFactory } from '../backend.js';
import { kHeaderBytes } from './framing.js';
import { createWebBackend } from './index.js';
import { kMaxChannelMessageBytes } from './mesh.js';
import type { LinkListener, LinkOpeners } from './openers.js';

export interface NodeOpenersOptions {
  /** Listen on (and advertise) this interface's first IPv4 address instead of the host given. */
  networkInterface?: string;
}

/** A frame header on top of the largest chunk, and some slack for WebSocket framing. */
const kMaxPayload = kMaxChannelMessageBytes + kHeaderBytes + 1024;
/** How long ws waits for the peer's close frame before it drops the connection. */
const kCloseTimeoutMs = 1000;
const kSocketOptions = { perMessageDeflate: false, maxPayload: kMaxPayload, closeTimeout: kCloseTimeoutMs } as const;
/** Node dials with a zero masking key: ws then neither masks nor unmasks (see the header). */
const kDialOptions = { ...kSocketOptions, generateMask: (mask: Uint8Array) => void mask.fill(0) } as const;

/** The web backend of a Node rank (the 'web' entry of ../backends.ts). */
export const nodeWebBackend: BackendFactory = (config: Config, log) =>
  createWebBackend(nodeOpeners(config.networkInterface === undefined ? {} : { networkInterface: config.networkInterface }))(
    config,
    log,
  );

export function nodeOpeners(options: NodeOpenersOptions = {}): LinkOpeners {
  return {
    traits: { sendsSharedViews: true, retainsSentBytes: true, sendCallback: true },
    listen: (host) => listen(options.networkInterface === undefined ? host : interfaceAddress(options.networkInterface)),
    dial: (url) => new WebSocket(url, kDialOptions),
    connectStore: (address, secret, timeoutMs) =>
      TcpStoreClient.connect({ ...address, connectTimeoutMs: timeoutMs, key: new JobKey(secret) }),
  };
}

/** A WebSocket server on an ephemeral port of `host`. */
export async function listen(host: string): Promise<LinkListener> {
  const server = new WebSocketServer({ host, port: 0, clientTracking: false, ...kSocketOptions });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.on('error', () => {}); // after listening: per-connection errors surface on their sockets
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the WebSocket listener has no port');
  let deliver: ((channel: ChannelLike, remote: string) => void) | null = null;
  server.on('connection', (socket, request) => {
    // Nobody knew the URL before onChannel: such a connection is not ours.
    if (deliver === null) socket.terminate();
    else deliver(socket, `${request.socket.remoteAddress}:${request.socket.remotePort}`);
  });
  return {
    url: `ws://${isIP(host) === 6 ? `[${host}]` : host}:${address.port}`,
    onChannel: (cb) => {
      deliver = cb;
    },
    // The port closes at once; ws's callback would wait for every accepted connection to end.
    close: async () => server.close(),
  };
}
