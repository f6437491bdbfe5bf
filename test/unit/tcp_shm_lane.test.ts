import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PeerFailureError, ProtocolError, TimeoutError } from '../../src/core/errors.js';
import { kHeaderBytes, kKindLink, kLinkShmCredit, readU32 } from '../../src/transport/tcp/framing.js';
import type { ShmLaneOptions } from '../../src/transport/tcp/shm_lane.js';
import type { TcpTransport } from '../../src/transport/tcp/tcp_transport.js';
import { delay, equalBytes, freeze, makeWorld, pattern } from './tcp_test_helpers.js';

const kTestTimeout = { timeout: 30_000 };
const kib = 1024;

/** A fresh directory in tmpfs when the machine has one (the lane works on any file system). */
const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'ringreduce-lane-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

function laneOptions(overrides: Partial<ShmLaneOptions> = {}): ShmLaneOptions {
  return { dir: root, slots: 3, slotBytes: 64 * kib, minBytes: 1 * kib, ...overrides };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 5) {
    if (waited > 5000) throw new Error(`timed out waiting for ${what}`);
    await delay(5);
  }
}

/** Both directions of every link have settled their offer (accepted or declined). */
async function lanesSettled(transports: readonly TcpTransport[], expected: number): Promise<void> {
  await until(() => transports.every((t) => t.lanesInUse() === expected), `${expected} lanes per rank`);
}

function filesIn(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.startsWith('ringreduce-'));
}

describe('TcpTransport shared-memory lane', () => {
  it('carries messages that fit, in order with the socket, whichever side comes first', kTestTimeout, async () => {
    const world = await makeWorld(2, { sharedMemory: laneOptions() });
    try {
      const [a, b] = world.transports as [TcpTransport, TcpTransport];
      await lanesSettled(world.transports, 1);
      assert.deepEqual(filesIn(root), [], 'the receiver unlinks the file once it has it open');
      // Sizes on both sides of minBytes and slotBytes, on two tags, interleaved.
      const sizes = [500, 2 * kib, 64 * kib, 100 * kib, 3 * kib, 64 * kib + 1, 1 * kib, 0];
      const sends = sizes.map((size, i) => ({ tag: 1 + (i % 2), data: pattern(size, i + 1) }));
      // Recvs posted first for tag 1; tag 2's are posted after everything arrived.
      const early = sends.filter((s) => s.tag === 1).map((s) => ({ s, into: new Uint8Array(s.data.byteLength) }));
      const earlyDone = Promise.all(early.map(({ s, into }) => b.recv(0, s.tag, into)));
      await Promise.all(sends.map((s) => a.send(1, s.tag, s.data)));
      await earlyDone;
      const late = sends.filter((s) => s.tag === 2).map((s) => ({ s, into: new Uint8Array(s.data.byteLength) }));
      await Promise.all(late.map(({ s, into }) => b.recv(0, s.tag, into)));
      for (const { s, into } of [...early, ...late])
        assert.ok(equalBytes(into, s.data), `tag ${s.tag}, ${s.data.byteLength} bytes`);
      const laned = sizes.filter((n) => n >= kib && n <= 64 * kib).reduce((x, y) => x + y, 0);
      const stats = b.stats();
      assert.ok(stats.sharedBytes > 0, 'some messages were copied straight from the lane');
      assert.ok(stats.sharedBytes <= laned);
      // Into SharedArrayBuffer memory too, and the other direction.
      const into = new Uint8Array(new SharedArrayBuffer(40 * kib));
      const source = pattern(40 * kib, 99, true);
      await Promise.all([a.recv(1, 7, into), b.send(0, 7, source)]);
      assert.ok(equalBytes(into, source));
      assert.equal(a.stats().sharedBytes, 40 * kib);
    } finally {
      await world.close();
    }
    assert.deepEqual(filesIn(root), []);
  });

  for (const slots of [2, 4]) {
    it(
      `a recv behind more unclaimed messages than the lane has slots still completes (${slots} slots)`,
      kTestTimeout,
      async () => {
        const world = await makeWorld(2, { sharedMemory: laneOptions({ slots }) });
        try {
          const [a, b] = world.transports as [TcpTransport, TcpTransport];
          await lanesSettled(world.transports, 1);
          // One message received first: its slot's credit may still be owed (nothing goes back
          // to the sender to carry it), and it counts against the slots held below.
          const first = pattern(8 * kib, 3);
          const firstInto = new Uint8Array(first.byteLength);
          await Promise.all([b.recv(0, 3, firstInto), a.send(1, 3, first)]);
          assert.ok(equalBytes(firstInto, first));
          // Ten messages nobody receives yet, then the one the receiver waits for: the sender needs
          // slots back while the ten are unclaimed, so the receiver must not hold them all.
          const waiting = Array.from({ length: 10 }, (_, i) => pattern(8 * kib, 100 + i));
          const wanted = pattern(8 * kib, 7);
          const into = new Uint8Array(wanted.byteLength);
          const got = b.recv(0, 2, into);
          const sent = Promise.all([...waiting.map((data) => a.send(1, 1, data)), a.send(1, 2, wanted)]);
          await got;
          await sent;
          assert.ok(equalBytes(into, wanted));
          for (const [i, data] of waiting.entries()) {
            const out = new Uint8Array(data.byteLength);
            await b.recv(0, 1, out);
            assert.ok(equalBytes(out, data), `message ${i} of tag 1`);
          }
          const stats = b.stats();
          const held = slots - 1;
          // Exactly: a credit still owed goes back rather than a message being staged for it.
          assert.equal(
            stats.stagedBytes,
            (10 - held) * 8 * kib,
            `beyond the ${held} held slot(s), unclaimed messages were staged`,
          );
        } finally {
          await world.close();
        }
      },
    );
  }

  /** Counts the frames `rank` writes to `peer` that are a lane credit and nothing else. */
  function countLoneCredits(
    world: { links: { peer: number; sendSocket: { write: (...args: never[]) => boolean } }[][] },
    rank: number,
    peer: number,
  ) {
    const socket = world.links[rank]?.find((l) => l.peer === peer)?.sendSocket;
    if (socket === undefined) throw new Error(`rank ${rank} has no link to rank ${peer}`);
    const counted = { lone: 0 };
    const write = socket.write.bind(socket) as (chunk: Uint8Array, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: Uint8Array, ...rest: unknown[]) => {
      // A credit link frame whose payload ends the chunk.
      const lone =
        chunk[1] === kKindLink && readU32(chunk, 4) === kLinkShmCredit && chunk.byteLength === kHeaderBytes + readU32(chunk, 8);
      if (lone) counted.lone++;
      return write(chunk, ...rest);
    }) as never;
    return counted;
  }

  it('a credit goes back with the next frame to the peer: a ring of exchanges sends none of its own', kTestTimeout, async () => {
    const world = await makeWorld(2, { sharedMemory: laneOptions({ slots: 4 }) });
    try {
      const [a, b] = world.transports as [TcpTransport, TcpTransport];
      await lanesSettled(world.transports, 1);
      const fromA = countLoneCredits(world, 0, 1);
      const fromB = countLoneCredits(world, 1, 0);
      for (let step = 0; step < 20; step++) {
        const there = pattern(16 * kib, step);
        const back = pattern(16 * kib, 100 + step);
        const intoB = new Uint8Array(there.byteLength);
        const intoA = new Uint8Array(back.byteLength);
        // Each rank sends once it has received, as a ring's steps do.
        await Promise.all([
          a.send(1, 1, there).then(() => a.recv(1, 2, intoA)),
          b.recv(0, 1, intoB).then(() => b.send(0, 2, back)),
        ]);
        assert.ok(equalBytes(intoB, there) && equalBytes(intoA, back), `step ${step}`);
      }
      assert.equal(b.stats().sharedBytes + a.stats().sharedBytes, 2 * 20 * 16 * kib, 'every message took the lane');
      assert.deepEqual([fromA.lone, fromB.lone], [0, 0], 'no credit frames of their own');
    } finally {
      await world.close();
    }
  });

  it('a one-way stream longer than the lane gets its credits back in frames of their own', kTestTimeout, async () => {
    const world = await makeWorld(2, { sharedMemory: laneOptions({ slots: 4 }) });
    try {
      const [a, b] = world.transports as [TcpTransport, TcpTransport];
      await lanesSettled(world.transports, 1);
      const fromB = countLoneCredits(world, 1, 0);
      const messages = Array.from({ length: 12 }, (_, i) => pattern(16 * kib, i));
      const intos = messages.map((m) => new Uint8Array(m.byteLength));
      await Promise.all([...messages.map((m) => a.send(1, 1, m)), ...intos.map((into) => b.recv(0, 1, into))]);
      for (const [i, m] of messages.entries()) assert.ok(equalBytes(intos[i] as Uint8Array, m), `message ${i}`);
      // The sender needed 8 slots back, and the receiver owes at most one before it flushes.
      assert.ok(fromB.lone >= 2, `the receiver handed slots back on its own (${fromB.lone} frames)`);
    } finally {
      await world.close();
    }
  });

  it('a length mismatch rejects that recv only, and frees the slot', kTestTimeout, async () => {
    const world = await makeWorld(2, { sharedMemory: laneOptions({ slots: 2 }) });
    try {
      const [a, b] = world.transports as [TcpTransport, TcpTransport];
      await lanesSettled(world.transports, 1);
      // One posted first, one held in its slot: both refused, both slots back.
      const posted = b.recv(0, 1, new Uint8Array(4 * kib));
      await a.send(1, 1, pattern(5 * kib, 1));
      await assert.rejects(posted, ProtocolError);
      await a.send(1, 1, pattern(6 * kib, 2));
      await a.sendControl(1, Uint8Array.of(1));
      await delay(20);
      await assert.rejects(b.recv(0, 1, new Uint8Array(4 * kib)), /has 6144 bytes but the recv expects 4096/);
      for (let i = 0; i < 6; i++) {
        const data = pattern(3 * kib, 10 + i);
        const out = new Uint8Array(data.byteLength);
        await Promise.all([a.send(1, 2, data), b.recv(0, 2, out)]);
        assert.ok(equalBytes(out, data));
      }
    } finally {
      await world.close();
    }
  });

  it('a peer without the lane declines it, and the socket carries everything', kTestTimeout, async () => {
    const world = await makeWorld(2, (rank) => (rank === 0 ? { sharedMemory: laneOptions() } : {}));
    try {
      const [a, b] = world.transports as [TcpTransport, TcpTransport];
      await until(() => filesIn(root).length === 0, 'the declined file to be removed');
      assert.equal(a.lanesInUse(), 0);
      assert.equal(b.lanesInUse(), 0);
      const data = pattern(32 * kib, 3);
      const into = new Uint8Array(data.byteLength);
      await Promise.all([a.send(1, 1, data), b.recv(0, 1, into)]);
      assert.ok(equalBytes(into, data));
      assert.equal(b.stats().sharedBytes, 0);
    } finally {
      await world.close();
    }
  });

  it('a send waiting for a slot of a stopped peer times out with the link', kTestTimeout, async () => {
    const world = await makeWorld(2, { sharedMemory: laneOptions({ slots: 2 }), ioTimeoutMs: 300 });
    try {
      const [a] = world.transports as [TcpTransport, TcpTransport];
      await lanesSettled(world.transports, 1);
      freeze(world, 1); // rank 1 reads nothing more, so it hands back no slot
      const sends = Array.from({ length: 4 }, (_, i) => a.send(1, 1, pattern(8 * kib, i)));
      // Two take the slots at once; the others wait, then fail with the link.
      await Promise.all(sends.slice(0, 2));
      const results = await Promise.allSettled(sends.slice(2));
      for (const result of results) {
        assert.equal(result.status, 'rejected');
        const reason = (result as PromiseRejectedResult).reason;
        assert.ok(reason instanceof TimeoutError || reason instanceof PeerFailureError, String(reason));
      }
    } finally {
      await world.close();
    }
    assert.deepEqual(filesIn(root), []);
  });
});
