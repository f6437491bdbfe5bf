/**
 * TLS on the mesh and the store (src/rendezvous/tls_links.ts): the links negotiate TLS 1.3 with
 * the PSK keyed from the secret, and a rank with another secret or without TLS is refused
 * quickly, with an error that names the settings, instead of hanging until the deadline.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import tls from 'node:tls';
import { InvalidArgumentError, ProtocolError, RingReduceError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { connectMesh, destroyLinks, type MeshOptions, type PeerLink } from '../../src/rendezvous/mesh.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { TlsLinks } from '../../src/rendezvous/tls_links.js';
import { createTcpTransport } from '../../src/transport/tcp/index.js';
import { storeFixture } from './mesh_test_helpers.js';

const kTimeoutMs = 4000;

describe('TLS links', () => {
  const stores = storeFixture();
  let job = 0;

  async function mesh(overrides: Partial<MeshOptions> & { rank: number; size: number }): Promise<PeerLink[]> {
    const store = await stores.client();
    return connectMesh({
      store,
      host: '127.0.0.1',
      jobId: `tls${job}`,
      timeoutMs: kTimeoutMs,
      keyPrefix: `tls${job}/`,
      localSockets: false,
      ...overrides,
    });
  }

  /** Both ranks' outcomes, and how long the slower took. */
  async function pair(a: Partial<MeshOptions>, b: Partial<MeshOptions>): Promise<{ errors: Error[]; ms: number }> {
    job++;
    const start = performance.now();
    const results = await Promise.allSettled([mesh({ rank: 0, size: 2, ...a }), mesh({ rank: 1, size: 2, ...b })]);
    for (const r of results) if (r.status === 'fulfilled') destroyLinks(r.value);
    return {
      errors: results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as Error),
      ms: performance.now() - start,
    };
  }

  it('runs TLS 1.3 with AES-128-GCM on both sockets of a link, and carries bytes', async () => {
    job++;
    const secret = 'tls-secret';
    const options = (rank: number) => ({
      rank,
      size: 2,
      key: new JobKey(secret),
      tls: TlsLinks.fromSecret(secret, `tls${job}`),
    });
    const [zero, one] = await Promise.all([mesh(options(0)), mesh(options(1))]);
    try {
      for (const link of [...(zero ?? []), ...(one ?? [])]) {
        for (const socket of [link.recvSocket, link.sendSocket]) {
          assert.ok(socket instanceof tls.TLSSocket);
          assert.equal(socket.getProtocol(), 'TLSv1.3');
          assert.equal(socket.getCipher().name, 'TLS_AES_128_GCM_SHA256');
        }
      }
    } finally {
      destroyLinks(zero ?? []);
      destroyLinks(one ?? []);
    }
  });

  it('refuses a rank with another secret, on both ranks, with an error naming the settings, well before the deadline', async () => {
    const withSecret = (secret: string) => ({ key: new JobKey(secret), tls: TlsLinks.fromSecret(secret, `tls${job + 1}`) });
    const { errors, ms } = await pair(withSecret('one'), withSecret('two'));
    assert.equal(errors.length, 2, errors.join('\n'));
    assert.ok(
      errors.some((e) => /TLS handshake .*failed.*RINGREDUCE_TLS.*RINGREDUCE_SECRET/.test(e.message)),
      errors.join('\n'),
    );
    assert.ok(ms < kTimeoutMs / 2, `took ${Math.round(ms)} ms`);
  });

  it('refuses a rank without TLS among TLS ranks, on both ranks, well before the deadline', async () => {
    const secret = 'shared';
    const { errors, ms } = await pair(
      { key: new JobKey(secret), tls: TlsLinks.fromSecret(secret, `tls${job + 1}`) },
      { key: new JobKey(secret) },
    );
    assert.equal(errors.length, 2, errors.join('\n'));
    assert.ok(
      errors.every((e) => e instanceof RingReduceError && /RINGREDUCE_TLS set alike/.test(e.message)),
      errors.join('\n'),
    );
    assert.ok(ms < kTimeoutMs / 2, `took ${Math.round(ms)} ms`);
  });

  it('the store: a TLS client with the secret is served; one with another secret is refused at once', async () => {
    const secret = 'store-secret';
    const server = new TcpStoreServer({
      host: '127.0.0.1',
      port: 0,
      key: new JobKey(secret),
      tls: TlsLinks.fromSecret(secret, 'job'),
    });
    const address = await server.listen();
    try {
      const good = await TcpStoreClient.connect({
        ...address,
        connectTimeoutMs: kTimeoutMs,
        key: new JobKey(secret),
        tls: TlsLinks.fromSecret(secret, 'job'),
      });
      await good.set('k', Buffer.from('v'));
      assert.equal(Buffer.from(await good.get('k', 1000)).toString(), 'v');
      await good.close();
      const start = performance.now();
      await assert.rejects(
        TcpStoreClient.connect({
          ...address,
          connectTimeoutMs: kTimeoutMs,
          key: new JobKey('other'),
          tls: TlsLinks.fromSecret('other', 'job'),
        }),
        (e) => e instanceof ProtocolError && /TLS handshake with the store .*failed/.test(e.message),
      );
      assert.ok(performance.now() - start < kTimeoutMs / 2);
    } finally {
      await server.close();
    }
  });

  it('tls without a secret is refused by name', async () => {
    assert.throws(
      () => TlsLinks.fromSecret(undefined, 'job'),
      (e) => e instanceof InvalidArgumentError && /RINGREDUCE_SECRET/.test(e.message),
    );
    await assert.rejects(
      createTcpTransport({
        rank: 0,
        size: 2,
        storeAddress: { host: '127.0.0.1', port: 1 },
        hostStore: false,
        jobId: 'job',
        timeouts: { connectMs: 1000, ioMs: 1000 },
        tls: { store: true },
      }),
      (e) => e instanceof InvalidArgumentError && /RINGREDUCE_TLS.*RINGREDUCE_SECRET/.test(e.message),
    );
  });
});
