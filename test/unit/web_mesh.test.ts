/**
 * The web mesh connect (src/transport/web/mesh.ts) through a real TcpStoreServer: who dials whom
 * (Node ranks with a URL, and ranks without one as a browser's are, linked to each other by a
 * data channel whose signalling goes through the store), one deadline naming the ranks that never
 * came, and a peer with another secret refused with the reason.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProtocolError, TimeoutError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import type { ChannelLike } from '../../src/rendezvous/channel.js';
import type { Store } from '../../src/rendezvous/store.js';
import { TcpStoreClient } from '../../src/rendezvous/tcp_store.js';
import { WebJobKey } from '../../src/transport/web/link_auth.js';
import { connectWebMesh, kBrowserWebSocketLink, kDataChannelLink, kWebSocketLink } from '../../src/transport/web/mesh.js';
import { listen, nodeOpeners } from '../../src/transport/web/node_openers.js';
import type { LinkOpeners } from '../../src/transport/web/openers.js';
import { storeSignal } from '../../src/transport/web/store_signal.js';
import { type WebLink, WebTransport } from '../../src/transport/web/web_transport.js';
import { equalBytes, pattern } from './tcp_test_helpers.js';
import { startStore } from './web_test_helpers.js';

const kSecret = 'mesh secret';

async function storeClients(count: number): Promise<{ clients: TcpStoreClient[]; close(): Promise<void> }> {
  const store = await startStore(kSecret);
  const clients = await Promise.all(
    Array.from({ length: count }, () =>
      TcpStoreClient.connect({ ...store.address, connectTimeoutMs: 5000, key: new JobKey(kSecret) }),
    ),
  );
  return {
    clients,
    close: async () => {
      await Promise.all(clients.map((c) => c.close()));
      await store.close();
    },
  };
}

/**
 * A rank as a browser's: no listener, it dials; its "data channel" to another such rank is a
 * WebSocket that the offerer listens for and the answerer dials, the URL passed through the
 * store's signalling as a page would pass its SDP offer.
 */
function browserLike(): LinkOpeners {
  const node = nodeOpeners();
  return {
    dial: node.dial,
    traits: { sendsSharedViews: false, retainsSentBytes: true, sendCallback: false },
    webSocketLink: kBrowserWebSocketLink,
    dataChannel: async (_peer, offerer, signal) => {
      if (offerer) {
        const listener = await listen('127.0.0.1');
        const accepted = new Promise<ChannelLike>((resolve) => listener.onChannel((channel) => resolve(channel)));
        await signal.send('offer', listener.url);
        const channel = await accepted;
        await listener.close();
        return channel;
      }
      return node.dial(await signal.receive('offer', 5000));
    },
  };
}

describe('web mesh connect', () => {
  it('Node ranks and browser-like ranks: WebSockets where one side listens, a data channel between two that cannot', async () => {
    const size = 4;
    const browsers = new Set([1, 3]);
    const { clients, close } = await storeClients(size);
    const key = await WebJobKey.create(kSecret);
    let links: WebLink[][] = [];
    try {
      links = await Promise.all(
        clients.map((store, rank) =>
          connectWebMesh({
            store,
            rank,
            size,
            jobId: 'mixed',
            key,
            openers: browsers.has(rank) ? browserLike() : nodeOpeners(),
            host: '127.0.0.1',
            timeoutMs: 5000,
          }),
        ),
      );
      for (const [rank, mine] of links.entries()) {
        assert.deepEqual(
          mine.map((l) => l.peer),
          [0, 1, 2, 3].filter((p) => p !== rank),
        );
        for (const link of mine) {
          const dataChannel = browsers.has(rank) && browsers.has(link.peer);
          // A browser dials every Node rank, and cuts what it sends to one as a browser's WebSocket does.
          const sizes = dataChannel ? kDataChannelLink : browsers.has(rank) ? kBrowserWebSocketLink : kWebSocketLink;
          assert.equal(link.chunkBytes, sizes.chunkBytes, `${rank}-${link.peer}`);
          if (dataChannel) assert.equal(link.address, 'data channel');
        }
      }
      // Every pair carries a message each way, the data-channel pair in 64 KiB chunks.
      const transports = links.map((mine, rank) => new WebTransport(rank, size, mine, { ioTimeoutMs: 5000 }));
      const length = 200_000;
      await Promise.all(
        transports.flatMap((t) =>
          [0, 1, 2, 3]
            .filter((p) => p !== t.rank)
            .flatMap((p) => {
              const into = new Uint8Array(length);
              return [
                t.send(p, 1, pattern(length, t.rank * 10 + p)),
                t.recv(p, 1, into).then(() => assert.ok(equalBytes(into, pattern(length, p * 10 + t.rank)), `${p} to ${t.rank}`)),
              ];
            }),
        ),
      );
      await Promise.all(transports.map((t) => t.close()));
    } finally {
      for (const mine of links) for (const link of mine) link.port.channel.close();
      await close();
    }
  });

  it('one deadline: a rank that never comes is named by every rank that waited for it', async () => {
    const { clients, close } = await storeClients(2);
    const key = await WebJobKey.create(kSecret);
    try {
      const started = performance.now();
      const results = await Promise.allSettled(
        clients.map((store, rank) =>
          connectWebMesh({
            store,
            rank,
            size: 3,
            jobId: 'short',
            key,
            openers: nodeOpeners(),
            host: '127.0.0.1',
            timeoutMs: 400,
          }),
        ),
      );
      for (const [rank, result] of results.entries()) {
        assert.equal(result.status, 'rejected');
        const error = (result as PromiseRejectedResult).reason as Error;
        assert.ok(error instanceof TimeoutError, `rank ${rank}: ${error.message}`);
        assert.match(
          error.message,
          /web mesh of rank \d \(job "short", size 3\) incomplete after 400 ms: ranks \[2\] did not publish their offer/,
        );
      }
      assert.ok(performance.now() - started < 2000);
    } finally {
      await close();
    }
  });

  it('a rank of another secret is refused: the dialer fails at once with the reason, the acceptor names it at the deadline', async () => {
    const { clients, close } = await storeClients(2);
    const keys = [await WebJobKey.create(kSecret), await WebJobKey.create('another secret')];
    const refusals: string[] = [];
    try {
      const results = await Promise.allSettled(
        clients.map((store, rank) =>
          connectWebMesh({
            store,
            rank,
            size: 2,
            jobId: 'secrets',
            key: keys[rank] as WebJobKey,
            openers: nodeOpeners(),
            host: '127.0.0.1',
            timeoutMs: 1500,
            onRefused: (remote, reason) => refusals.push(`${remote}: ${reason}`),
          }),
        ),
      );
      const [acceptor, dialer] = results.map((r) => (r as PromiseRejectedResult).reason as Error);
      assert.ok(dialer instanceof ProtocolError, `rank 1: ${dialer?.message}`);
      assert.match(dialer.message, /rank 0 at ws:\/\/127\.0\.0\.1:\d+ could not prove it knows the job secret/);
      assert.ok(acceptor instanceof TimeoutError, `rank 0: ${acceptor?.message}`);
      assert.match(
        acceptor.message,
        /ranks \[1\] did not connect to us; refused connections: 127\.0\.0\.1:\d+: rank 1 sent no response/,
      );
      assert.equal(refusals.length, 1);
    } finally {
      await close();
    }
  });

  it("the store's signalling: messages of a kind arrive in order, each kind on its own, between the two ranks only", async () => {
    const { clients, close } = await storeClients(2);
    try {
      const [a, b] = clients.map((store, rank) => storeSignal(store as Store, 'sig/', rank, 1 - rank));
      if (!a || !b) throw new Error('two ranks');
      for (const text of ['c1', 'c2', 'c3']) await a.send('candidate', text);
      await a.send('offer', 'sdp');
      assert.equal(await b.receive('offer', 1000), 'sdp');
      assert.deepEqual(
        [await b.receive('candidate', 1000), await b.receive('candidate', 1000), await b.receive('candidate', 1000)],
        ['c1', 'c2', 'c3'],
      );
      await assert.rejects(a.receive('offer', 50), TimeoutError, 'nothing sent to rank 0');
      await assert.rejects(a.send('no/slashes', ''), /signal kind/);
    } finally {
      await close();
    }
  });
});
