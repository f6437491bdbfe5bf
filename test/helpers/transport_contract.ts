/**
 * The transport contract (the header of src/transport/transport.ts), written once as cases that
 * every backend runs:
 * - test/unit/transport_contract.test.ts, N ranks in this process: memory (microtask, macrotask,
 *   jitter and rendezvous delivery), tcp (loopback sockets: the test mesh of tcp_test_helpers.ts,
 *   and the job's own settings through tcpBackend), solo (size 1);
 * - test/multiprocess/transport_contract_mpi.test.ts, one rank per process under mpirun: MPI
 *   (fixture: fixtures/transport_contract_job.ts).
 *
 * A case is a program that every rank runs (SPMD) over a ContractWorld: the transports this
 * process holds, all N of them in one process, its own one under mpirun. Ranks wait for each
 * other only through the transport (fences: zero-length data messages on kFenceTag), so the same
 * code runs in both. A case about one rank (close, the deadline) acts on the first transport
 * this process holds: rank 0 in one process, every rank under mpirun. No case waits for a send
 * before posting the receive it matches, so all of them run on a backend without buffering
 * (memory's rendezvous delivery, MPI's large messages).
 *
 * Clauses a backend does not exercise here, and why:
 * - MPI: a broken link. MPI has nothing to break from outside: a rank that vanishes is the
 *   launcher's business (mpirun ends the job), and how MPI errors become PeerFailureError is
 *   checked against a fake addon (test/unit/mpi_transport.test.ts). Its cases share one
 *   transport (MPI starts once per process): they run in list order with a barrier between
 *   them, the control case first (messages held until a handler is set can only be seen before
 *   the first handler), close last, and the deadline in a job of its own (a rank whose receive
 *   timed out cannot finalise MPI, so mpirun ends that job).
 * - tcp through tcpBackend: a broken link, because the factory keeps the sockets to itself; the
 *   test mesh, whose sockets the test can destroy, covers it.
 * - solo: every clause that needs a peer; it runs the size-1 cases (arguments, close).
 * - Activity (`setActive`) is left to each backend's tests: which timers an idle transport may
 *   keep is not observable through the contract (tcp: liveness tests).
 */
import assert from 'node:assert/strict';
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { kMaxTag, type Transport } from '../../src/transport/transport.js';

/** The transports one process holds of a job of `size` ranks. */
export interface ContractWorld {
  readonly size: number;
  /** All ranks, in rank order, when the job runs in one process; this process's rank under mpirun. */
  readonly local: readonly Transport[];
  /** Breaks the link between ranks a and b as a crash or a cut would; absent where the backend cannot. */
  readonly breakLink?: (a: number, b: number) => void;
}

export interface ContractCase {
  /** Short and stable: the MPI fixture takes ids on its command line. */
  readonly id: string;
  readonly title: string;
  readonly minSize: number;
  /** The I/O timeout the world must be built with; default kContractIoTimeoutMs. */
  readonly ioTimeoutMs?: number;
  /** Uses world.breakLink. */
  readonly breaksLinks?: boolean;
  /** What the case leaves of this process's transports: none usable ('closed'), or a peer failed ('failed'). */
  readonly leaves?: 'closed' | 'failed';
  run(world: ContractWorld): Promise<void>;
}

/** Long enough that no case but the deadline's meets it. */
export const kContractIoTimeoutMs = 10_000;
/** The deadline case's I/O timeout: short, so the case is quick. */
export const kDeadlineIoTimeoutMs = 250;
/** Tags of the fences that order the ranks of a case, and of the barrier between cases under mpirun. */
export const kFenceTag = 1_000_000;
export const kBarrierTag = 1_000_001;

const kEmpty = new Uint8Array(0);

/** Runs `body` for every rank this process holds. */
async function everyRank(world: ContractWorld, body: (t: Transport) => Promise<void>): Promise<void> {
  await Promise.all(world.local.map(body));
}

function othersOf(t: Transport): number[] {
  return Array.from({ length: t.size }, (_, r) => r).filter((r) => r !== t.rank);
}

function neighboursOf(t: Transport): { left: number; right: number } {
  return { left: (t.rank + t.size - 1) % t.size, right: (t.rank + 1) % t.size };
}

/** A zero-length message to and from every peer on `tag`: once it resolves, every peer has reached the same point. */
export async function meetEveryPeer(t: Transport, tag: number): Promise<void> {
  const peers = othersOf(t);
  await Promise.all([...peers.map((p) => t.send(p, tag, kEmpty)), ...peers.map((p) => t.recv(p, tag, new Uint8Array(0)))]);
}

/** Deterministic bytes, different for every key (sender, receiver, tag, index...). */
export function payload(length: number, ...key: number[]): Uint8Array {
  let x = key.reduce((h, k) => Math.imul(h ^ (k + 0x9e3779b9), 0x85ebca6b) >>> 0, 0x2545f491) || 1;
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function assertBytes(actual: Uint8Array, expected: Uint8Array, what: string): void {
  const same = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength).equals(
    Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength),
  );
  assert.ok(same, `${what}: got ${actual.byteLength} bytes that differ from the ${expected.byteLength} sent`);
}

function names(error: unknown, peer: number): boolean {
  return error instanceof Error && new RegExp(`\\brank ${peer}\\b`).test(error.message);
}

function isPeerFailureNaming(peer: number) {
  return (error: unknown) => error instanceof PeerFailureError && error.peerRank === peer && names(error, peer);
}

/** Rejects with a message naming `what` when `promise` is not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Sends messages of `lengths` to the right neighbour on `tag` and receives as many from the left.
 * 'recv first': the receives are posted, then the receiver tells its sender to go. 'send first':
 * the messages are sent, then a fence behind them; the receives are posted once the fence
 * arrived (on a backend with one stream per link, the messages had arrived before it).
 */
async function ringExchange(t: Transport, tag: number, lengths: readonly number[], order: 'recv first' | 'send first') {
  const { left, right } = neighboursOf(t);
  const sendAll = () => lengths.map((n, i) => t.send(right, tag, payload(n, t.rank, right, tag, i)));
  const intos = lengths.map((n) => new Uint8Array(n));
  const recvAll = () => intos.map((into) => t.recv(left, tag, into));
  let ops: Promise<void>[];
  if (order === 'recv first') {
    const recvs = recvAll();
    const go = t.send(left, kFenceTag, kEmpty);
    await t.recv(right, kFenceTag, new Uint8Array(0));
    ops = [...recvs, go, ...sendAll()];
  } else {
    const sends = [...sendAll(), t.send(right, kFenceTag, kEmpty)];
    await t.recv(left, kFenceTag, new Uint8Array(0));
    ops = [...sends, ...recvAll()];
  }
  await Promise.all(ops);
  intos.forEach((into, i) => {
    assertBytes(
      into,
      payload(lengths[i] as number, left, t.rank, tag, i),
      `rank ${t.rank}, message ${i} from rank ${left} (${order})`,
    );
  });
}

const controlCase: ContractCase = {
  id: 'control',
  title: 'control messages arrive in order per peer, those sent before the handler was set included',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      const peers = othersOf(t);
      const early = 12;
      const total = 24;
      // Some beyond MPI's eager limit and a socket's buffer, so that they travel differently.
      const message = (from: number, to: number, i: number) => payload(i % 7 === 3 ? 100_000 : 1 + i, from, to, i);
      const sendRange = (from: number, to: number) =>
        Promise.all(
          peers.flatMap((p) => Array.from({ length: to - from }, (_, k) => t.sendControl(p, message(t.rank, p, from + k)))),
        );
      await sendRange(0, early);
      // Every peer has sent its early messages before this rank sets its handler.
      await meetEveryPeer(t, kFenceTag);
      const got: Array<[number, Uint8Array]> = [];
      const all = new Promise<void>((resolve) => {
        t.onControl((peer, bytes) => {
          got.push([peer, bytes.slice()]);
          if (got.length === total * peers.length) resolve();
        });
      });
      await sendRange(early, total);
      await within(all, kContractIoTimeoutMs, `rank ${t.rank}: ${total} control messages from each peer`);
      for (const p of peers) {
        const fromPeer = got.filter(([peer]) => peer === p).map(([, bytes]) => bytes);
        assert.equal(fromPeer.length, total, `rank ${t.rank}: control messages from rank ${p}`);
        fromPeer.forEach((bytes, i) => {
          assertBytes(bytes, message(p, t.rank, i), `rank ${t.rank}, control message ${i} from rank ${p}`);
        });
      }
    }),
};

const fifoCase: ContractCase = {
  id: 'fifo',
  title: 'data is matched first-in first-out per (peer, tag), whatever the order of tags, peers and receives',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      const tags = [11, 12];
      const count = 16;
      const length = (tag: number, i: number) => 1 + ((i * 37 + tag) % 50);
      // The sends interleave the two tags; per tag they go in index order.
      const schedule: Array<[number, number]> = [];
      const next = [0, 0];
      for (let k = 0; k < 2 * count; k++) {
        const which = (next[1] as number) === count || ((k * 7) % 5 < 3 && (next[0] as number) < count) ? 0 : 1;
        schedule.push([tags[which] as number, (next[which] as number)++]);
      }
      const peers = othersOf(t);
      const sends = peers.flatMap((p) => schedule.map(([tag, i]) => t.send(p, tag, payload(length(tag, i), t.rank, p, tag, i))));
      const fences = peers.map((p) => t.send(p, kFenceTag, kEmpty));
      // Receives in an order unlike the sends (peers backwards, the second tag first): the first
      // half of each tag's before the messages arrive, the second half after every peer's fence.
      const received: Array<{ from: number; tag: number; i: number; into: Uint8Array; done: Promise<void> }> = [];
      const receive = (first: number, end: number) => {
        for (const from of [...peers].reverse()) {
          for (const tag of [...tags].reverse()) {
            for (let i = first; i < end; i++) {
              const into = new Uint8Array(length(tag, i));
              received.push({ from, tag, i, into, done: t.recv(from, tag, into) });
            }
          }
        }
      };
      receive(0, count / 2);
      await Promise.all(peers.map((p) => t.recv(p, kFenceTag, new Uint8Array(0))));
      receive(count / 2, count);
      await Promise.all([...sends, ...fences, ...received.map((r) => r.done)]);
      for (const { from, tag, i, into } of received) {
        assertBytes(
          into,
          payload(length(tag, i), from, t.rank, tag, i),
          `rank ${t.rank}, message ${i} with tag ${tag} from rank ${from}`,
        );
      }
    }),
};

const postedBeforeAndAfterCase: ContractCase = {
  id: 'recv-before-and-after',
  title: 'a receive posted before the message, or after it arrived, gets it',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      // A small message, and one past every backend's eager, staging and shared-memory thresholds.
      await ringExchange(t, 21, [7, 300_000], 'recv first');
      await ringExchange(t, 22, [7, 300_000], 'send first');
    }),
};

const exactLengthCase: ContractCase = {
  id: 'exact-length',
  title: 'a message lands in exactly the bytes of the receive, a view into shared memory, nothing around it',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      const { left, right } = neighboursOf(t);
      const tag = 23;
      const guard = 16;
      const lengths = [1, 4096, 65_537, 1 << 20];
      const sends = lengths.map((n, i) => t.send(right, tag, payload(n, t.rank, right, tag, i)));
      // Offset views into one SharedArrayBuffer, like slices of a tensor, with guard bytes between them.
      const memory = new Uint8Array(new SharedArrayBuffer(lengths.reduce((sum, n) => sum + n + guard, guard))).fill(0xee);
      let offset = guard;
      const intos = lengths.map((n) => {
        const view = memory.subarray(offset, offset + n);
        offset += n + guard;
        return view;
      });
      await Promise.all([...sends, ...intos.map((into) => t.recv(left, tag, into))]);
      intos.forEach((into, i) => {
        assertBytes(into, payload(lengths[i] as number, left, t.rank, tag, i), `rank ${t.rank}, message ${i}`);
        assert.equal(memory[into.byteOffset - 1], 0xee, `rank ${t.rank}: a byte before message ${i} was written`);
        assert.equal(memory[into.byteOffset + into.byteLength], 0xee, `rank ${t.rank}: a byte after message ${i} was written`);
      });
    }),
};

const lengthMismatchCase: ContractCase = {
  id: 'length-mismatch',
  title: 'a message of another length than the receive is a ProtocolError; the next one matches',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      const { left, right } = neighboursOf(t);
      const tag = 31;
      const into = () => new Uint8Array(4);
      // Shorter, with the receive posted first (the assertion is attached before the rejection can come).
      const short = assert.rejects(t.recv(left, tag, into()), ProtocolError, `rank ${t.rank}: 3 bytes into a receive of 4`);
      const go = t.send(left, kFenceTag, kEmpty);
      await t.recv(right, kFenceTag, new Uint8Array(0));
      const sends = [go, t.send(right, tag, payload(3, 1))];
      await short;
      // Longer, arrived before its receive.
      sends.push(t.send(right, tag, payload(5, 2)), t.send(right, kFenceTag, kEmpty));
      await t.recv(left, kFenceTag, new Uint8Array(0));
      await assert.rejects(t.recv(left, tag, into()), ProtocolError, `rank ${t.rank}: 5 bytes into a receive of 4`);
      // The stream goes on.
      const ok = into();
      sends.push(t.send(right, tag, payload(4, 3)));
      await Promise.all([...sends, t.recv(left, tag, ok)]);
      assertBytes(ok, payload(4, 3), `rank ${t.rank}, the message after the mismatches`);
    }),
};

const zeroLengthCase: ContractCase = {
  id: 'zero-length',
  title: 'zero-length messages, on the largest tag, among others on that tag',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      await ringExchange(t, kMaxTag, [0, 3, 0, 0], 'recv first');
      await ringExchange(t, kMaxTag, [0, 0, 3, 0], 'send first');
    }),
};

const severalPeersCase: ContractCase = {
  id: 'several-peers',
  title: 'concurrent sends to several peers each arrive whole at their peer',
  minSize: 3,
  run: (world) =>
    everyRank(world, async (t) => {
      const tag = 61;
      const length = (from: number, to: number) => 70_000 + 1000 * from + to;
      const peers = othersOf(t);
      const intos = peers.map((from) => new Uint8Array(length(from, t.rank)));
      await Promise.all([
        ...peers.map((to) => t.send(to, tag, payload(length(t.rank, to), t.rank, to, tag))),
        ...peers.map((from, k) => t.recv(from, tag, intos[k] as Uint8Array)),
      ]);
      peers.forEach((from, k) => {
        assertBytes(
          intos[k] as Uint8Array,
          payload(length(from, t.rank), from, t.rank, tag),
          `rank ${t.rank}, from rank ${from}`,
        );
      });
    }),
};

const bufferReuseCase: ContractCase = {
  id: 'send-buffer-reuse',
  title: 'once send resolves, the sender may overwrite its buffer without changing what arrives',
  minSize: 2,
  run: (world) =>
    everyRank(world, async (t) => {
      const { left, right } = neighboursOf(t);
      const tag = 71;
      const length = 200_000;
      const data = payload(length, t.rank, tag);
      const sent = t.send(right, tag, data);
      const fence = t.send(right, kFenceTag, kEmpty);
      await t.recv(left, kFenceTag, new Uint8Array(0));
      const into = new Uint8Array(length);
      const received = t.recv(left, tag, into);
      await sent;
      data.fill(0xaa);
      await Promise.all([received, fence]);
      assertBytes(into, payload(length, left, tag), `rank ${t.rank}, from rank ${left}`);
    }),
};

const invalidArgumentsCase: ContractCase = {
  id: 'invalid-arguments',
  title: 'an invalid peer or tag is an InvalidArgumentError',
  minSize: 1,
  run: (world) =>
    everyRank(world, async (t) => {
      const one = new Uint8Array(1);
      for (const peer of [t.rank, t.size, -1, 0.5, Number.NaN]) {
        const what = `rank ${t.rank}, peer ${peer}`;
        await assert.rejects(t.send(peer, 1, one), InvalidArgumentError, `${what}: send`);
        await assert.rejects(t.recv(peer, 1, new Uint8Array(1)), InvalidArgumentError, `${what}: recv`);
        await assert.rejects(t.sendControl(peer, one), InvalidArgumentError, `${what}: sendControl`);
      }
      if (t.size === 1) return; // no valid peer to pair an invalid tag with
      const { right } = neighboursOf(t);
      for (const tag of [-1, kMaxTag + 1, 1.5, Number.NaN]) {
        await assert.rejects(t.send(right, tag, one), InvalidArgumentError, `rank ${t.rank}, tag ${tag}: send`);
        await assert.rejects(t.recv(right, tag, new Uint8Array(1)), InvalidArgumentError, `rank ${t.rank}, tag ${tag}: recv`);
      }
    }),
};

const brokenLinkCase: ContractCase = {
  id: 'broken-link',
  title: 'a broken link fails pending and later operations with PeerFailureError naming the peer; onPeerFailure runs once',
  minSize: 2,
  breaksLinks: true,
  leaves: 'failed',
  run: async (world) => {
    const breakLink = world.breakLink;
    assert.ok(breakLink, 'the world cannot break a link');
    const ends = [world.local[0], world.local[1]] as [Transport, Transport];
    assert.deepEqual(
      ends.map((t) => t?.rank),
      [0, 1],
      'every rank is in this process',
    );
    const heard = ends.map((t) => {
      const peers: number[] = [];
      t.onPeerFailure((peer, error) => {
        assert.ok(error instanceof PeerFailureError);
        peers.push(peer);
      });
      return peers;
    });
    const pending = ends.map((t) =>
      assert.rejects(
        t.recv(1 - t.rank, 41, new Uint8Array(4)),
        isPeerFailureNaming(1 - t.rank),
        `rank ${t.rank}: the pending receive`,
      ),
    );
    breakLink(0, 1);
    await Promise.all(pending);
    for (const t of ends) {
      const peer = 1 - t.rank;
      const failed = isPeerFailureNaming(peer);
      await assert.rejects(t.send(peer, 42, new Uint8Array(1)), failed, `rank ${t.rank}: a later send`);
      await assert.rejects(t.recv(peer, 42, new Uint8Array(1)), failed, `rank ${t.rank}: a later receive`);
      await assert.rejects(t.sendControl(peer, new Uint8Array(1)), failed, `rank ${t.rank}: a later control message`);
    }
    await delay(50); // time for a second notification, if a backend were to send one
    for (const [i, t] of ends.entries()) {
      const peer = 1 - t.rank;
      assert.equal(heard[i]?.filter((p) => p === peer).length, 1, `rank ${t.rank}: onPeerFailure calls for rank ${peer}`);
    }
  },
};

const deadlineCase: ContractCase = {
  id: 'recv-deadline',
  title: 'a receive with no message for the I/O timeout is a TimeoutError naming the peer and the tag',
  minSize: 2,
  ioTimeoutMs: kDeadlineIoTimeoutMs,
  leaves: 'failed',
  run: async (world) => {
    const t = world.local[0] as Transport;
    const { right } = neighboursOf(t);
    const tag = 77;
    const started = performance.now();
    await assert.rejects(
      t.recv(right, tag, new Uint8Array(8)),
      (e: unknown) => e instanceof TimeoutError && names(e, right) && /\btag 77\b/.test(e.message),
      `rank ${t.rank}: a receive from rank ${right} that nobody answers`,
    );
    const waited = performance.now() - started;
    assert.ok(waited >= kDeadlineIoTimeoutMs - 20, `rank ${t.rank}: timed out after ${Math.round(waited)} ms`);
  },
};

const closeCase: ContractCase = {
  id: 'close',
  title: 'close rejects pending operations with ShutdownError, refuses later ones, and is idempotent',
  minSize: 1,
  leaves: 'closed',
  run: async (world) => {
    const t = world.local[0] as Transport;
    if (t.size === 1) {
      await Promise.all([t.close(), t.close()]);
      await t.close();
      return;
    }
    const { right } = neighboursOf(t);
    const pending = assert.rejects(t.recv(right, 51, new Uint8Array(4)), ShutdownError, `rank ${t.rank}: the pending receive`);
    await Promise.all([t.close(), t.close()]);
    await t.close();
    await pending;
    await assert.rejects(t.send(right, 52, new Uint8Array(1)), ShutdownError, `rank ${t.rank}: a later send`);
    await assert.rejects(t.recv(right, 52, new Uint8Array(1)), ShutdownError, `rank ${t.rank}: a later receive`);
    await assert.rejects(t.sendControl(right, new Uint8Array(1)), ShutdownError, `rank ${t.rank}: a later control message`);
  },
};

/**
 * Every case, in the order they can share one transport (under mpirun): the control case first,
 * the ones that leave the transport closed or failed last.
 */
export const kContractCases: readonly ContractCase[] = [
  controlCase,
  fifoCase,
  postedBeforeAndAfterCase,
  exactLengthCase,
  lengthMismatchCase,
  zeroLengthCase,
  severalPeersCase,
  bufferReuseCase,
  invalidArgumentsCase,
  brokenLinkCase,
  deadlineCase,
  closeCase,
];

/** The cases a world of `size` ranks can run. */
export function casesFor(size: number, world: { canBreakLinks: boolean }): ContractCase[] {
  return kContractCases.filter((c) => size >= c.minSize && (world.canBreakLinks || !c.breaksLinks));
}
