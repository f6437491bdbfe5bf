/**
 * send and recv: matched by (sender, receiver, tag) in call order. A ring (every rank sends to
 * rank + 1 and receives from rank - 1) of every dtype, tags interleaved with the order within
 * each tag kept, 1 MiB messages, messages while collectives run, a length or dtype mismatch
 * (rejected on both sides with the same MismatchError, the pair going on), argument errors,
 * deadlines, the Sync twins.
 *
 * Deadlines: an unmatched call fails after the stall timeout, and the harness has no per-case
 * options; the in-process backends run with 20 s (collectives.test.ts), which would cost minutes
 * over their eight worlds, so the deadline case checks only where the stall timeout is at most
 * 5 s: the MPI job (mpi_conformance_job.ts, 5 s). In process it passes without checking.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, constructorOf, kDTypes } from '../../../src/core/dtypes.js';
import { MismatchError, TimeoutError } from '../../../src/core/errors.js';
import type { TypedArray } from '../../../src/core/types.js';
import { concatenated, referenceAllreduce, referenceInput } from '../../helpers/reference.js';
import {
  type ConformanceCase,
  check,
  checkArray,
  checkError,
  checkJson,
  checkRefused,
  errorOf,
  part,
  settleAll,
  textsOfEveryRank,
} from './case.js';

const next = (rank: number, size: number) => (rank + 1) % size;
const previous = (rank: number, size: number) => (rank + size - 1) % size;

/**
 * Sends this rank's `message(rank)` to the next rank and receives the previous rank's into a
 * fresh array (a typed array, or { data, shape } when `shaped`); checks the recv resolved to the
 * array passed, its values, and the sent array untouched.
 */
async function ringOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  tag: number,
  message: (rank: number) => TypedArray,
  what: string,
  shaped = false,
): Promise<void> {
  await part(what, async () => {
    const reference = message(rank);
    const mine = reference.slice();
    const expected = message(previous(rank, size));
    const into = new (constructorOf(dtypeName(expected)))(expected.length);
    const sent = rr.send(mine, { to: next(rank, size), tag });
    if (shaped) {
      const target = { data: into, shape: [1, into.length] };
      const received = await rr.recv(target, { from: previous(rank, size), tag });
      check(received === target, what, 'recv did not resolve to the { data, shape } passed');
    } else {
      const received = await rr.recv(into, { from: previous(rank, size), tag });
      check(received === into, what, 'recv did not resolve to the array passed');
    }
    await sent;
    checkArray(dtypeName(expected), into, expected, what);
    checkArray(dtypeName(expected), mine, reference, `${what}: the sent array was modified`);
  });
}

/** The dtype of a typed array made by referenceInput (constructor name to dtype). */
function dtypeName(array: TypedArray) {
  const dtype = kDTypes.find((d) => constructorOf(d) === array.constructor);
  if (dtype === undefined) throw new Error(`not a typed array of a dtype: ${array.constructor.name}`);
  return dtype;
}

const ring: ConformanceCase = {
  name: 'send/recv: a ring (to rank + 1, from rank - 1) of every dtype at once, one tag each, typed arrays and { data, shape }',
  minRanks: 2,
  async run(rr, rank, size) {
    await settleAll(
      kDTypes.flatMap((dtype, tag) => [
        ringOnce(rr, rank, size, tag, (r) => referenceInput(dtype, r, 100 + tag, 'sum'), `ring/${dtype}`),
        ringOnce(rr, rank, size, 100 + tag, (r) => referenceInput(dtype, r, 7, 'sum'), `ring/${dtype}/shaped`, true),
      ]),
    );
  },
};

const tags: ConformanceCase = {
  name: 'send/recv: 3 tags of 4 messages each, sent interleaved and received tag by tag: the order within each tag is kept',
  minRanks: 2,
  async run(rr, rank, size) {
    const kTags = [12, 3, 7];
    const kMessages = 4;
    // Every message of a tag has the tag's length; the values say sender, tag and position.
    const message = (from: number, tag: number, m: number) =>
      Float64Array.from({ length: tag + 2 }, (_, i) => from * 1e6 + tag * 1e3 + m * 10 + i / 8);
    const sendAll = () => {
      const sends: Promise<void>[] = [];
      for (let m = 0; m < kMessages; m++) {
        for (const tag of kTags) sends.push(rr.send(message(rank, tag, m), { to: next(rank, size), tag }));
      }
      return sends;
    };
    const recvAll = () =>
      [...kTags].reverse().flatMap((tag) =>
        Array.from({ length: kMessages }, (_, m) =>
          part(`tag ${tag}, message ${m}`, async () => {
            const into = await rr.recv(new Float64Array(tag + 2), { from: previous(rank, size), tag });
            checkArray('float64', into, message(previous(rank, size), tag, m), `tag ${tag}, message ${m}`);
          }),
        ),
      );
    // Even ranks post their recvs first, odd ranks their sends: offers wait for recvs and recvs for offers.
    const calls = rank % 2 === 0 ? [...recvAll(), ...sendAll()] : [...sendAll(), ...recvAll()];
    await settleAll(calls);
  },
};

const large: ConformanceCase = {
  name: 'send/recv: 1 MiB messages round the ring (float64, and uint8 of 1 MiB + 3)',
  minRanks: 2,
  async run(rr, rank, size) {
    await ringOnce(rr, rank, size, 5, (r) => referenceInput('float64', r, 2 ** 17, 'sum'), 'float64 1 MiB');
    await ringOnce(rr, rank, size, 5, (r) => referenceInput('uint8', r, 2 ** 20 + 3, 'sum'), 'uint8 1 MiB + 3');
  },
};

const withCollectives: ConformanceCase = {
  name: 'send/recv round the ring while an allreduce, an allgather, a reducescatter and a broadcast run',
  minRanks: 2,
  async run(rr, rank, size) {
    const count = 2 ** 16;
    await settleAll([
      ringOnce(rr, rank, size, 9, (r) => referenceInput('int32', r, count, 'sum'), 'ring int32'),
      part('allreduce', async () => {
        const result = await rr.allreduce(referenceInput('float32', rank, count, 'sum').slice(), { name: 'p2p+/allreduce' });
        checkArray('float32', result, referenceAllreduce('float32', 'sum', count, size), 'allreduce');
      }),
      ringOnce(rr, rank, size, 10, (r) => referenceInput('float64', r, 3, 'sum'), 'ring float64'),
      part('allgather', async () => {
        const inputs = Array.from({ length: size }, (_, r) => referenceInput('uint16', r, 1000, 'sum'));
        const result = await rr.allgather((inputs[rank] as TypedArray).slice(), { name: 'p2p+/allgather' });
        checkArray('uint16', result, concatenated('uint16', inputs), 'allgather');
      }),
      part('reducescatter', async () => {
        const result = await rr.reducescatter(new Int8Array(size).fill(1), { name: 'p2p+/reducescatter' });
        checkJson([...result], [size], 'reducescatter');
      }),
      part('broadcast', async () => {
        const result = await rr.broadcast(new BigInt64Array([BigInt(rank) - 5n]), { name: 'p2p+/broadcast', root: size - 1 });
        check(result[0] === BigInt(size - 1) - 5n, 'broadcast', `${result[0]}`);
      }),
    ]);
  },
};

/**
 * Rank 0 sends `sent` to rank 1 and rank 1 receives into `expected`, both with `tag`: both
 * reject with MismatchError and exactly `message`, the same on both (every rank compares them),
 * and a matching pair on the same tag then works. The other ranks make no send or recv.
 */
function pairMismatch(what: string, sent: () => TypedArray, into: () => TypedArray, message: string): ConformanceCase {
  const tag = 77;
  return {
    name: `send/recv mismatch: ${what} rejects on both sides with the same MismatchError; the pair goes on`,
    minRanks: 2,
    async run(rr, rank) {
      // Every rank makes the same collectives whatever happens: the checks come last.
      const outcome =
        rank === 0
          ? await errorOf(() => rr.send(sent(), { to: 1, tag }))
          : rank === 1
            ? await errorOf(() => rr.recv(into(), { from: 0, tag }))
            : undefined;
      const text = outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : '';
      const texts = await textsOfEveryRank(rr, text, `p2p-mm/${what}`);
      const after =
        rank === 0
          ? rr.send(new Int16Array([1, 2, 3]), { to: 1, tag }).then(() => undefined)
          : rank === 1
            ? rr.recv(new Int16Array(3), { from: 0, tag })
            : Promise.resolve(undefined);
      const received = await errorOf(async () => {
        const got = await after;
        if (got) checkJson([...got], [1, 2, 3], 'the pair after the mismatch');
      });

      if (rank > 1) return;
      checkError(outcome, MismatchError, message, what);
      check(texts[0] === texts[1], `${what}: both sides have the same message`, `rank 0 "${texts[0]}", rank 1 "${texts[1]}"`);
      check(
        received === undefined,
        `${what}: the pair after it`,
        `failed: ${received instanceof Error ? received.message : received}`,
      );
    },
  };
}

const mismatches: ConformanceCase[] = [
  pairMismatch(
    'lengths',
    () => new Float32Array(4),
    () => new Float32Array(5),
    'Mismatched send/recv from rank 0 to rank 1 (tag 77): rank 0 sends 4 float32, rank 1 expects 5 float32.',
  ),
  pairMismatch(
    'data types',
    () => new Float32Array(4),
    () => new Int32Array(4),
    'Mismatched send/recv from rank 0 to rank 1 (tag 77): rank 0 sends 4 float32, rank 1 expects 4 int32.',
  ),
];

const refused: ConformanceCase = {
  name: 'send/recv: argument errors at the call (from or to itself, a rank out of range, a bad tag), no rank waits',
  async run(rr, rank, size) {
    const peers = `[0, ${size - 1}] (this is rank ${rank})`;
    await checkRefused('recv from itself', `option 'from' must be another rank in ${peers} or 'any', got ${rank}`, () =>
      rr.recv(new Float32Array(2), { from: rank, tag: 3 }),
    );
    await checkRefused('send to itself', `option 'to' must be another rank in ${peers}, got ${rank}`, () =>
      rr.send(new Float32Array(2), { to: rank, tag: 3 }),
    );
    await checkRefused('send to a rank out of range', `option 'to' must be another rank in ${peers}, got ${size}`, () =>
      rr.send(new Float32Array(2), { to: size, tag: 3 }),
    );
    // The tags (with a job of one rank, every peer is refused first).
    if (size === 1) return;
    await checkRefused('a negative tag', "option 'tag' must be an integer in [0, 2^31), got -1", () =>
      rr.recv(new Float32Array(2), { from: next(rank, size), tag: -1 }),
    );
    await checkRefused('a tag of 2^31', `option 'tag' must be an integer in [0, 2^31), got ${2 ** 31}`, () =>
      rr.send(new Float32Array(2), { to: next(rank, size), tag: 2 ** 31 }),
    );
    // Nothing was sent or posted: the ring on tag 3 gets exactly its own messages.
    await ringOnce(rr, rank, size, 3, (r) => Float32Array.from([r, -r]), 'the ring after the refused calls');
  },
};

/** The longest stall timeout the deadline case waits for. */
const kDeadlineMaxMs = 5000;

const deadlines: ConformanceCase = {
  name: `send/recv: an unmatched recv and an unmatched send time out after the stall timeout; the tags work after (checked where it is <= ${kDeadlineMaxMs} ms: MPI)`,
  minRanks: 2,
  async run(rr, rank, size) {
    const timeoutMs = rr.config.stallTimeoutMs;
    if (timeoutMs <= 0 || timeoutMs > kDeadlineMaxMs) return;
    const [recvTag, sendTag] = [4242, 4243];
    const started = performance.now();
    // Every rank: a recv from the previous rank nobody sends, a send to the next rank nobody receives.
    const [recvError, sendError] = await Promise.all([
      errorOf(() => rr.recv(new Float32Array(3), { from: previous(rank, size), tag: recvTag })),
      errorOf(() => rr.send(new Int32Array([-1, -1]), { to: next(rank, size), tag: sendTag })),
    ]);
    const waited = performance.now() - started;
    // In step again before anything matches on these tags.
    await rr.barrier({ name: 'p2p-deadline' });
    const after = await errorOf(async () => {
      const [, got] = await Promise.all([
        rr.send(new Int32Array([rank, 1]), { to: next(rank, size), tag: sendTag }),
        rr.recv(new Int32Array(2), { from: previous(rank, size), tag: sendTag }),
      ]);
      checkJson([...got], [previous(rank, size), 1], 'the send/recv after the deadlines (not the withdrawn message)');
    });

    const prev = previous(rank, size);
    checkError(
      recvError,
      TimeoutError,
      `recv of 3 float32 from rank ${prev} (tag ${recvTag}): rank ${prev} sent nothing within ${timeoutMs} ms`,
      'the unmatched recv',
    );
    const to = next(rank, size);
    checkError(
      sendError,
      TimeoutError,
      `send of 2 int32 to rank ${to} (tag ${sendTag}): rank ${to} posted no matching recv within ${timeoutMs} ms`,
      'the unmatched send',
    );
    check(waited >= timeoutMs - 100, 'the deadlines', `passed after ${waited.toFixed(0)} ms`);
    check(after === undefined, 'the send/recv after the deadlines', `failed: ${after instanceof Error ? after.message : after}`);
  },
};

const sync: ConformanceCase = {
  name: 'sendSync/recvSync: ranks 0 and 1 exchange (one sends first, the other receives first)',
  needsSync: true,
  minRanks: 2,
  async run(rr, rank) {
    if (rank > 1) return;
    const peer = 1 - rank;
    const mine = Float64Array.from([rank, rank + 0.5, 1e300]);
    const into = allocShared('float64', 3) as Float64Array;
    if (rank === 0) {
      rr.sendSync(mine, { to: peer, tag: 21 });
      check(rr.recvSync(into, { from: peer, tag: 21 }) === into, 'recvSync', 'did not return the array passed');
    } else {
      check(rr.recvSync(into, { from: peer, tag: 21 }) === into, 'recvSync', 'did not return the array passed');
      rr.sendSync(mine, { to: peer, tag: 21 });
    }
    checkJson([...into], [peer, peer + 0.5, 1e300], 'the values');
  },
};

export const pointToPointCases: readonly ConformanceCase[] = [
  ring,
  tags,
  large,
  withCollectives,
  ...mismatches,
  refused,
  deadlines,
  sync,
];
