/**
 * The web backend, assembled: for jobs with browser ranks, where every link is a message channel
 * (WebSocket or RTCDataChannel) and every rank, Node ranks included, uses this backend. One
 * deadline (config.startTimeoutMs) covers reaching the store and completing the mesh (mesh.ts).
 *
 * `createWebBackend(openers)` is the backend factory (../backend.ts) built from the capabilities
 * of one side (openers.ts): node_openers.ts gives Node's (`nodeWebBackend`, the 'web' entry of
 * ../backends.ts), browser_openers.ts a browser engine worker's. This file and everything it
 * imports has no Node import, so a page's bundle can take it.
 *
 * The store. No rank hosts it: the launcher does (ringrun runs a TcpStoreServer for web jobs,
 * as for elastic ones, and bridges it over WebSocket for browsers: rendezvous/web_store_bridge.ts).
 * A browser rank reaches it at RINGREDUCE_STORE_URL (rendezvous/web_store_client.ts); a Node rank
 * at RINGREDUCE_STORE_ADDR, over TCP (LinkOpeners.connectStore, which also tells the address to
 * listen on), or at the URL when only that is set. A test or a job started by hand must start a TcpStoreServer itself, before the ranks, with
 * the job's secret (`new TcpStoreServer({ host, port, key: new JobKey(secret) })`, then `listen()`).
 *
 * Where a Node rank listens: RINGREDUCE_NETWORK_INTERFACE's address (node_openers.ts), else
 * RINGREDUCE_ADDRESS, else the store's host when it is a loopback address (a one-machine job),
 * else the local address of this rank's connection to the store (the one that routes to the
 * launcher). The listener's URL carries that host, for the other ranks and for browsers.
 */
import type { Config } from '../../core/config.js';
import { InvalidArgumentError } from '../../core/errors.js';
import type { Store } from '../../rendezvous/store.js';
import { WebStoreClient } from '../../rendezvous/web_store_client.js';
import { type BackendFactory, handleOf } from '../backend.js';
import { WebJobKey } from './link_auth.js';
import { connectWebMesh } from './mesh.js';
import type { LinkOpeners } from './openers.js';
import { WebTransport, type WebTransportOptions } from './web_transport.js';

export type { ChannelLike, ChannelTraits } from '../../rendezvous/channel.js';
export type { LinkListener, LinkOpeners, Signal } from './openers.js';
export { WebTransport, type WebTransportOptions } from './web_transport.js';

type StoreWithAddress = Store & { localAddress?: string | undefined };

/** The web backend over the channels `openers` can open (see the header). */
export function createWebBackend(openers: LinkOpeners): BackendFactory {
  return async (config, log) => {
    const { rank, size } = config;
    const options: WebTransportOptions = { ioTimeoutMs: config.ioTimeoutMs, heartbeatMs: config.heartbeatMs, shareFate: true };
    if (size === 1) return handleOf(new WebTransport(rank, size, [], options));
    const deadline = performance.now() + config.startTimeoutMs;
    const remaining = () => Math.max(1, Math.ceil(deadline - performance.now()));
    const key = await WebJobKey.create(config.secret);
    if (!key.authenticated && rank === 0) {
      log.warn('RINGREDUCE_SECRET is not set: connections are not authenticated (ringrun sets it; see docs/env.md)');
    }
    const store = await connectStore(config, openers, remaining());
    try {
      const links = await connectWebMesh({
        store,
        rank,
        size,
        jobId: config.jobId,
        key,
        openers,
        ...(openers.listen === undefined ? {} : { host: listenHost(config, store) }),
        timeoutMs: remaining(),
        onRefused: (remote, reason) => log.warn(`web mesh: refused a connection from ${remote}: ${reason}`),
      });
      return handleOf(new WebTransport(rank, size, links, options));
    } finally {
      await store.close();
    }
  };
}

/**
 * The store this rank meets the others at: over TCP where this side can (Node) and an address is
 * given (port 0: none), else at the bridge's URL.
 */
async function connectStore(config: Config, openers: LinkOpeners, timeoutMs: number): Promise<StoreWithAddress> {
  if (openers.connectStore !== undefined && (config.storePort !== 0 || config.storeUrl === undefined)) {
    return openers.connectStore({ host: config.storeHost, port: config.storePort }, config.secret, timeoutMs);
  }
  if (config.storeUrl === undefined) {
    throw new InvalidArgumentError(
      'this rank reaches the store only over WebSocket: set RINGREDUCE_STORE_URL (init option storeUrl)',
    );
  }
  return WebStoreClient.connect(openers.dial(config.storeUrl), redacted(config.storeUrl), timeoutMs);
}

function listenHost(config: Config, store: StoreWithAddress): string {
  const host = config.address ?? (isLoopback(config.storeHost) ? config.storeHost : store.localAddress);
  if (host === undefined) throw new InvalidArgumentError('cannot tell which address to listen on: set RINGREDUCE_ADDRESS');
  return host;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** The URL without what may be a credential (the launcher's token in the query, a user:password). */
export function redacted(url: string): string {
  const match = /^(wss?:\/\/)(?:[^@/]*@)?([^/?#]*)([^?#]*)/.exec(url);
  return match ? `${match[1]}${match[2]}${match[3]}` : 'the store URL';
}
