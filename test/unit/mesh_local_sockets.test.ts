/** Unix domain sockets between ranks of one host (local_socket.ts, mesh.ts, mesh_acceptor.ts). */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { JobKey } from '../../src/rendezvous/auth.js';
import { kAckBytes, kChallengeBytes } from '../../src/rendezvous/handshake.js';
import { localSocketPath, sameHostIdentity } from '../../src/rendezvous/local_socket.js';
import { connectMesh, destroyLinks, type MeshOptions, type PeerLink } from '../../src/rendezvous/mesh.js';
import { MeshAcceptor } from '../../src/rendezvous/mesh_acceptor.js';
import type { Store } from '../../src/rendezvous/store.js';
import { TcpTransport } from '../../src/transport/tcp/tcp_transport.js';
import { storeFixture, strangerWithWrongSecret } from './mesh_test_helpers.js';

const linux = process.platform === 'linux' && sameHostIdentity() !== null;
const skip = linux ? false : 'needs /proc (Linux) for the same-host identity';

interface Published {
  host: string;
  port: number;
  local?: { id: string; path: string };
}

/** A store that rewrites this rank's published address on its way in. */
function rewriting(store: Store, edit: (published: Published) => Published): Store {
  return {
    set: (key, value) =>
      store.set(
        key,
        key.includes('/addr/') ? Buffer.from(JSON.stringify(edit(JSON.parse(Buffer.from(value).toString())))) : value,
      ),
    get: (key, timeoutMs) => store.get(key, timeoutMs),
    add: (key, delta) => store.add(key, delta),
    close: () => store.close(),
  };
}

/** TCP sockets know their peer's port; Unix sockets have no port. */
const isUnix = (socket: net.Socket) => socket.remotePort === undefined && socket.localPort === undefined;

/** The pipe handles of this process once their count holds still (a closed socket's goes a little later). */
async function pipeHandles(): Promise<string[]> {
  const read = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('Pipe'));
  let last = read();
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = read();
    if (now.length === last.length) return now;
    last = now;
  }
  return last;
}

describe('Unix sockets: Node', () => {
  it('net.connect with onread lands received bytes in the caller-chosen buffer on a Unix socket too', { skip }, async () => {
    const path = localSocketPath('onread-test', 0) as string;
    const payload = Buffer.alloc(1 << 20);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    const server = net.createServer((s) => s.end(payload));
    await new Promise<void>((resolve) => server.listen({ path }, resolve));
    const mine = new Uint8Array(new SharedArrayBuffer(64 * 1024));
    const received: Buffer[] = [];
    let foreign = 0;
    let dataEvents = 0;
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect({
        path,
        onread: {
          buffer: () => mine,
          callback: (nread, buf) => {
            if (buf !== mine) foreign++;
            received.push(Buffer.from(buf.subarray(0, nread)));
            return true;
          },
        },
      });
      socket.on('data', () => dataEvents++);
      socket.on('error', reject);
      socket.on('close', () => resolve());
    });
    server.close();
    assert.equal(foreign, 0, 'every read landed in our buffer');
    assert.equal(dataEvents, 0, "onread replaces 'data' events");
    assert.ok(Buffer.concat(received).equals(payload));
    assert.equal(existsSync(path), false, 'closing the server removes its socket file');
  });
});

describe('Unix sockets: same-host identity and path', () => {
  it('the identity is stable, and a path fits in sun_path in the temporary directory', { skip }, () => {
    const id = sameHostIdentity();
    assert.match(id ?? '', /^[0-9a-f]{32}$/);
    assert.equal(sameHostIdentity(), id);
    const path = localSocketPath('a'.repeat(128), 123_456) as string;
    assert.equal(dirname(path), tmpdir());
    assert.ok(Buffer.byteLength(path) <= 103, path);
    assert.notEqual(localSocketPath('job', 0), localSocketPath('job', 0), 'two live listeners never share a path');
  });

  it('the acceptor replaces a stale file, and removes its socket when it stops listening', { skip }, async () => {
    const path = join(tmpdir(), `rr-stale-test-${process.pid}.sock`);
    const before = await pipeHandles(); // stdout and stderr may be pipes too
    writeFileSync(path, 'left behind by a crashed process');
    const acceptor = new MeshAcceptor({ rank: 0, size: 2, jobId: 'stale', key: new JobKey(undefined) });
    await acceptor.listen('127.0.0.1');
    assert.equal(await acceptor.listenLocal(path), true);
    const probe = net.connect({ path });
    await new Promise<void>((resolve, reject) => probe.once('connect', resolve).once('error', reject));
    probe.destroy();
    acceptor.destroyAll();
    assert.equal(existsSync(path), false);
    assert.deepEqual(await pipeHandles(), before);
  });
});

describe('connectMesh over Unix sockets', () => {
  const stores = storeFixture();
  let job = 0;
  const store = () => stores.client();

  async function mesh(overrides: Partial<MeshOptions> & { rank: number; size: number }): Promise<PeerLink[]> {
    return connectMesh({
      store: await store(),
      host: '127.0.0.1',
      jobId: `uds${job}`,
      timeoutMs: 3000,
      keyPrefix: `u${job}/`,
      ...overrides,
    });
  }

  async function published(rank: number): Promise<Published> {
    return JSON.parse(Buffer.from(await (await store()).get(`u${job}/addr/${rank}`, 2000)).toString());
  }

  /** Every ordered pair sends `bytes` through TcpTransports over the links; checks what arrives. */
  async function roundTrip(meshes: PeerLink[][], bytes: number): Promise<void> {
    const size = meshes.length;
    const transports = meshes.map((links, rank) => new TcpTransport(rank, size, links, { ioTimeoutMs: 10_000 }));
    const data = (from: number, to: number) => {
      const out = new Uint8Array(bytes);
      for (let i = 0; i < bytes; i++) out[i] = (i + 31 * from + 7 * to) & 0xff;
      return out;
    };
    const ops: Promise<void>[] = [];
    const into: [number, number, Uint8Array][] = [];
    for (let from = 0; from < size; from++) {
      for (let to = 0; to < size; to++) {
        if (from === to) continue;
        const buf = new Uint8Array(new SharedArrayBuffer(bytes));
        into.push([from, to, buf]);
        ops.push(
          (transports[to] as TcpTransport).recv(from, 9, buf),
          (transports[from] as TcpTransport).send(to, 9, data(from, to)),
        );
      }
    }
    await Promise.all(ops);
    for (const [from, to, buf] of into) assert.ok(Buffer.from(buf).equals(data(from, to)), `${from} → ${to}`);
    await Promise.all(transports.map((t) => t.close()));
  }

  it('3 ranks connect over Unix sockets both ways, data round-trips, the socket files are gone', { skip }, async () => {
    job++;
    const before = await pipeHandles();
    const meshes = await Promise.all([0, 1, 2].map((rank) => mesh({ rank, size: 3 })));
    for (const links of meshes) {
      for (const link of links) {
        assert.equal(link.via, 'unix');
        assert.ok(isUnix(link.recvSocket) && isUnix(link.sendSocket), `link to rank ${link.peer}`);
        assert.match(link.address, /^127\.0\.0\.1:\d+$/, 'errors still name the peer by its TCP address');
      }
    }
    const id = sameHostIdentity();
    for (const rank of [0, 1, 2]) {
      const entry = await published(rank);
      assert.equal(entry.local?.id, id);
      assert.equal(existsSync(entry.local?.path ?? ''), false, `rank ${rank}'s socket file was removed`);
    }
    await roundTrip(meshes, 3 << 20);
    assert.deepEqual(await pipeHandles(), before);
  });

  it('localSockets: false keeps every link on TCP and publishes no socket', { skip }, async () => {
    job++;
    const meshes = await Promise.all([0, 1, 2].map((rank) => mesh({ rank, size: 3, localSockets: false })));
    for (const links of meshes) {
      for (const link of links) {
        assert.equal(link.via, 'tcp');
        assert.ok(!isUnix(link.recvSocket) && !isUnix(link.sendSocket));
      }
    }
    assert.equal((await published(0)).local, undefined);
    await roundTrip(meshes, 1 << 20);
  });

  it('each dialer decides: a rank that turned them off uses TCP both ways, the others Unix', { skip }, async () => {
    job++;
    const meshes = await Promise.all([0, 1, 2].map((rank) => mesh({ rank, size: 3, localSockets: rank !== 0 })));
    const via = meshes.map((links) => links.map((l) => `${l.peer}:${l.via}:${isUnix(l.sendSocket) ? 'unix' : 'tcp'}`));
    assert.deepEqual(via, [
      ['1:tcp:tcp', '2:tcp:tcp'],
      ['0:tcp:tcp', '2:unix:unix'],
      ['0:tcp:tcp', '1:unix:unix'],
    ]);
    await roundTrip(meshes, 1 << 16);
  });

  it('a peer of another host (other identity) is dialed over TCP; a vanished socket file falls back to TCP', {
    skip,
  }, async () => {
    job++;
    const meshes = await Promise.all([
      mesh({ rank: 0, size: 3 }),
      // Rank 1 claims another host; rank 2's socket file is not where it says.
      mesh({
        rank: 1,
        size: 3,
        store: rewriting(await store(), (p) => ({ ...p, local: { id: 'elsewhere', path: '/nonexistent' } })),
      }),
      mesh({
        rank: 2,
        size: 3,
        store: rewriting(await store(), (p) => ({ ...p, local: { id: p.local?.id ?? '', path: `${p.local?.path}.gone` } })),
      }),
    ]);
    const via = meshes.map((links) => links.map((l) => `${l.peer}:${l.via}`));
    // Nobody dials rank 1's socket (its published identity differs) nor finds rank 2's; rank 1
    // itself still knows its true identity, so it dials rank 0's socket.
    assert.deepEqual(via, [
      ['1:tcp', '2:tcp'],
      ['0:unix', '2:tcp'],
      ['0:unix', '1:tcp'],
    ]);
    await roundTrip(meshes, 1 << 16);
  });

  it('refuses a stranger with a wrong secret on the Unix socket, and the mesh still completes', { skip }, async () => {
    job++;
    const key = new JobKey('uds-secret');
    const refused: string[] = [];
    const first = mesh({ rank: 0, size: 2, key, onRefused: (remote, reason) => refused.push(`${remote} ${reason}`) });
    const path = (await published(0)).local?.path as string;
    assert.ok(path, 'rank 0 published its socket');
    const answers = await strangerWithWrongSecret(net.connect({ path }), `uds${job}`, 9);
    assert.equal(answers.byteLength, kChallengeBytes + kAckBytes);
    assert.equal(answers.readUInt8(kChallengeBytes + 7), 6, 'ack status: bad auth');
    assert.equal(refused.length, 1);
    assert.equal(refused[0], `unix:${path} rank 1: authentication failed (wrong or missing job secret)`);
    const meshes = await Promise.all([first, mesh({ rank: 1, size: 2, key })]);
    assert.deepEqual(
      meshes.map((links) => links.map((l) => l.via)),
      [['unix'], ['unix']],
    );
    for (const links of meshes) destroyLinks(links);
    assert.equal(existsSync(path), false);
  });

  it('a failed mesh removes its socket file too', { skip }, async () => {
    job++;
    const failing = mesh({ rank: 0, size: 2, timeoutMs: 300 });
    const path = (await published(0)).local?.path as string;
    assert.equal(existsSync(path), true, 'the socket exists while the mesh connects');
    await assert.rejects(failing, /rank 1 did not call init\(\)/);
    assert.equal(existsSync(path), false);
  });
});
