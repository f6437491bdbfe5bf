import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { ProtocolError, TimeoutError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { kAckBytes, kChallengeBytes } from '../../src/rendezvous/handshake.js';
import { connectMesh, destroyLinks, type MeshOptions, type PeerLink } from '../../src/rendezvous/mesh.js';
import { TcpStoreClient } from '../../src/rendezvous/tcp_store.js';
import { createTcpTransport } from '../../src/transport/tcp/index.js';
import { storeFixture, strangerWithWrongSecret } from './mesh_test_helpers.js';
import { liveHandles } from './tcp_test_helpers.js';

describe('connectMesh', () => {
  const stores = storeFixture();
  let job = 0;

  async function mesh(overrides: Partial<MeshOptions> & { rank: number; size: number }): Promise<PeerLink[]> {
    const store = await stores.client();
    return connectMesh({ store, host: '127.0.0.1', jobId: `job${job}`, timeoutMs: 3000, keyPrefix: `t${job}/`, ...overrides });
  }

  it('connects 3 ranks: one receive and one send socket per peer, no-delay, ordered by rank', async () => {
    job++;
    // TCP only, so the ports below mean something (Unix sockets: mesh_local_sockets.test.ts).
    const meshes = await Promise.all([0, 1, 2].map((rank) => mesh({ rank, size: 3, localSockets: false })));
    assert.deepEqual(
      meshes.map((links) => links.map((l) => l.peer)),
      [
        [1, 2],
        [0, 2],
        [0, 1],
      ],
    );
    // rank 0's receive socket from rank 1 is rank 1's send socket to rank 0.
    const [m0, m1] = meshes as [PeerLink[], PeerLink[]];
    assert.equal(m0[0]?.recvSocket.localPort, m1[0]?.sendSocket.remotePort);
    assert.equal(typeof m0[0]?.recvSocket.localPort, 'number');
    assert.equal(m0[0]?.via, 'tcp');
    assert.match(m0[0]?.address ?? '', /^127\.0\.0\.1:\d+$/);
    for (const links of meshes) destroyLinks(links);
  });

  it('names the ranks that never show up', async () => {
    job++;
    const started = performance.now();
    const results = await Promise.allSettled([0, 1].map((rank) => mesh({ rank, size: 3, timeoutMs: 400 })));
    const elapsed = performance.now() - started;
    for (const r of results) {
      assert.equal(r.status, 'rejected');
      const e = (r as PromiseRejectedResult).reason as Error;
      assert.ok(e instanceof TimeoutError, String(e));
      assert.match(e.message, /^start-up of rank [01] \(of 3, job \S+\) timed out after \d+ ms: rank 2 did not call init\(\)/);
      assert.match(e.message, /rank 2 did not connect to rank [01]/);
    }
    assert.ok(elapsed < 2500, `gave up after ${elapsed} ms`);
  });

  it('refuses a dialer of another job with a clear error on both sides', async () => {
    job++;
    const [good, stranger] = await Promise.allSettled([
      mesh({ rank: 0, size: 2, timeoutMs: 800 }),
      mesh({ rank: 1, size: 2, jobId: 'other-job', timeoutMs: 800 }),
    ]);
    // Each side dials the other, so which refusal lands first varies; both fail, and the
    // refusal names the reason.
    assert.equal(stranger.status, 'rejected');
    assert.equal(good.status, 'rejected');
    const messages = [good, stranger].map((r) => String((r as PromiseRejectedResult).reason));
    assert.ok(
      messages.some((m) => /ProtocolError: rank \d at 127\.0\.0\.1:\d+ refused the connection: different job id/.test(m)),
      messages.join('\n'),
    );
  });

  it('ignores a stranger sending garbage to the data port', async () => {
    job++;
    const first = mesh({ rank: 0, size: 2 });
    const spy = await TcpStoreClient.connect({ ...stores.address, connectTimeoutMs: 2000 });
    const { host, port } = JSON.parse(Buffer.from(await spy.get(`t${job}/addr/0`, 2000)).toString());
    await spy.close();
    const garbage = net.connect(port, host);
    garbage.on('error', () => {});
    garbage.write(Buffer.alloc(32, 0x55));
    const links = await Promise.all([first, mesh({ rank: 1, size: 2 })]);
    for (const l of links) destroyLinks(l);
    garbage.destroy();
  });

  it('refuses and reports a stranger with a wrong secret, and the mesh still completes', async () => {
    job++;
    const key = new JobKey('mesh-secret');
    const refused: string[] = [];
    const first = mesh({ rank: 0, size: 2, key, onRefused: (remote, reason) => refused.push(`${remote} ${reason}`) });
    const spy = await TcpStoreClient.connect({ ...stores.address, connectTimeoutMs: 2000 });
    const { host, port } = JSON.parse(Buffer.from(await spy.get(`t${job}/addr/0`, 2000)).toString());
    await spy.close();
    // The stranger knows the job id and claims rank 1, but proves a different secret.
    const answers = await strangerWithWrongSecret(net.connect(port, host), `job${job}`, 3);
    assert.equal(answers.byteLength, kChallengeBytes + kAckBytes);
    assert.equal(answers.readUInt8(kChallengeBytes + 7), 6, 'ack status: bad auth');
    assert.match(refused.join('\n'), /127\.0\.0\.1:\d+ rank 1: authentication failed \(wrong or missing job secret\)/);
    const links = await Promise.all([first, mesh({ rank: 1, size: 2, key })]);
    for (const l of links) destroyLinks(l);
  });

  it('fails fast with a clear error when a peer proves a different secret', async () => {
    job++;
    const results = await Promise.allSettled([
      mesh({ rank: 0, size: 2, key: new JobKey('one'), timeoutMs: 1500 }),
      mesh({ rank: 1, size: 2, key: new JobKey('two'), timeoutMs: 1500 }),
    ]);
    // Both fail; the first to check a proof says why, the other may only see it hang up.
    assert.ok(results.every((r) => r.status === 'rejected'));
    const errors = results.map((r) => (r as PromiseRejectedResult).reason as Error);
    assert.ok(
      errors.some(
        (e) => e instanceof ProtocolError && /could not prove it knows the job secret|authentication failed/.test(e.message),
      ),
      errors.join('\n'),
    );
  });

  it('rejects a bad ack from a non-peer listening at a published address', async () => {
    job++;
    const fake = net.createServer((s) => {
      s.resume();
      s.on('error', () => {});
      s.write(Buffer.alloc(kChallengeBytes, 0x01));
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const store = await stores.client();
    const fakePort = (fake.address() as net.AddressInfo).port;
    await store.set(`t${job}/addr/1`, Buffer.from(JSON.stringify({ host: '127.0.0.1', port: fakePort })));
    await assert.rejects(
      mesh({ rank: 0, size: 2, timeoutMs: 1000 }),
      (e) => e instanceof ProtocolError && /not a ringreduce challenge/.test(e.message),
    );
    await new Promise((resolve) => fake.close(resolve));
  });
});

describe('createTcpTransport', () => {
  it('rendezvous, mesh and transport for 3 ranks, rank 0 starting last; close leaves no handles', {
    timeout: 20_000,
  }, async () => {
    const before = await liveHandles();
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const storeAddress = { host: '127.0.0.1', port: (probe.address() as net.AddressInfo).port };
    await new Promise((resolve) => probe.close(resolve));
    const make = (rank: number) =>
      createTcpTransport({
        rank,
        size: 3,
        storeAddress,
        hostStore: rank === 0,
        jobId: 'e2e',
        timeouts: { connectMs: 5000, ioMs: 5000 },
      });
    const others = [make(1), make(2)];
    await new Promise((resolve) => setTimeout(resolve, 200)); // ranks 1 and 2 retry meanwhile
    const handles = await Promise.all([make(0), ...others]);
    const [t0, t1, t2] = handles.map((h) => h.transport);
    assert.ok(t0 && t1 && t2);
    const into = new Uint8Array(3);
    await Promise.all([t2.recv(1, 5, into), t1.send(2, 5, Uint8Array.of(7, 8, 9))]);
    assert.deepEqual([...into], [7, 8, 9]);
    await Promise.all(handles.map((h) => h.close()));
    await handles[0]?.close(); // idempotent
    assert.deepEqual(await liveHandles(), before);
  });
});
