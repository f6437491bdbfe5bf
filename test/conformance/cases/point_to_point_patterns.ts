/**
 * The point-to-point patterns of pipeline and parameter-server programs: a recv from any rank
 * (the first matching send, resolving to { data, from }), batchSendRecv (a ring and a two-way
 * exchange posted as one batch, results in order, a refused entry posting nothing, a mismatch
 * in a batch), and send/recv inside a process set (set ranks, messages of the set apart from
 * the world's on the same tag), and the Sync twin of the batch (MPI; tcp on one rank only runs
 * its argument check).
 */
import { allocShared } from '../../../src/core/dtypes.js';
import { MismatchError } from '../../../src/core/errors.js';
import {
  type ConformanceCase,
  check,
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

/** What rank `from` sends as message `m`: values that say who and which. */
const payload = (from: number, m: number) => Float64Array.of(from, m, from * 100 + m);

const anySource: ConformanceCase = {
  name: "recv from 'any': rank 0 takes every other rank's 2 messages in recvs from any rank, each resolving to { data, from }, each sender's in order",
  minRanks: 2,
  async run(rr, rank, size) {
    const tag = 31;
    if (rank !== 0) {
      await settleAll([0, 1].map((m) => rr.send(payload(rank, m), { to: 0, tag })));
      return;
    }
    const received = await Promise.all(
      Array.from({ length: 2 * (size - 1) }, () => rr.recv(new Float64Array(3), { from: 'any', tag })),
    );
    const seen = new Map<number, number[]>();
    for (const { data, from } of received) {
      check(data instanceof Float64Array, 'the result', 'data is not the array passed');
      check(data[0] === from, 'the sender', `message of rank ${data[0]} reported from ${from}`);
      seen.set(from, [...(seen.get(from) ?? []), data[1] as number]);
    }
    const expected = Array.from({ length: size - 1 }, (_, i) => [i + 1, [0, 1]]);
    checkJson(
      [...seen.entries()].sort(([a], [b]) => a - b),
      expected,
      "every sender's messages, in the order it sent them",
    );
  },
};

const anyAndNamed: ConformanceCase = {
  name: "recv from 'any' and from a named rank on one tag: each offer goes to the first recv posted that takes its sender",
  minRanks: 2,
  async run(rr, rank) {
    const tag = 32;
    if (rank === 1) {
      await settleAll([0, 1].map((m) => rr.send(payload(1, m), { to: 0, tag })));
      return;
    }
    if (rank !== 0) return;
    // Posted first: the recv from rank 1 takes its first message, the recv from any rank its second.
    const named = rr.recv(new Float64Array(3), { from: 1, tag });
    const any = rr.recv(new Float64Array(3), { from: 'any', tag });
    const [first, second] = await Promise.all([named, any]);
    checkJson([...first], [...payload(1, 0)], 'the recv from rank 1');
    checkJson(second.from, 1, "the recv from 'any': its sender");
    checkJson([...second.data], [...payload(1, 1)], "the recv from 'any': its message");
  },
};

const batchRing: ConformanceCase = {
  name: 'batchSendRecv: a ring and a two-way exchange of several dtypes posted as one batch; results in order',
  minRanks: 2,
  async run(rr, rank, size) {
    const [to, from] = [next(rank, size), previous(rank, size)];
    const intoLeft = new Int32Array(2);
    const intoRight = { data: new Float32Array(4), shape: [2, 2] };
    const intoBig = new BigInt64Array(1);
    const results = await rr.batchSendRecv([
      { op: 'recv', into: intoLeft, from },
      { op: 'send', tensor: Int32Array.of(rank, -rank), to },
      { op: 'send', tensor: Float32Array.of(rank, 1, 2, 3), to: from, tag: 5 },
      { op: 'recv', into: intoRight, from: to, tag: 5 },
      { op: 'send', tensor: BigInt64Array.of(2n ** 62n + BigInt(rank)), to, tag: 6 },
      { op: 'recv', into: intoBig, from: 'any', tag: 6 },
    ]);
    check(results[0] === intoLeft, 'results[0]', 'is not the recv buffer passed');
    check(results[1] === undefined && results[2] === undefined, 'the sends', 'resolved to something');
    check(results[3] === intoRight, 'results[3]', 'is not the { data, shape } passed');
    checkJson([...intoLeft], [from, -from], 'from the previous rank');
    checkJson([...intoRight.data], [to, 1, 2, 3], 'from the next rank');
    checkJson({ ...results[5], data: [...results[5].data] }, { data: [2n ** 62n + BigInt(from)], from }, "the recv from 'any'");
  },
};

const batchRefused: ConformanceCase = {
  name: 'batchSendRecv: an invalid entry is refused, naming it, and none of the batch is posted',
  async run(rr, rank, size) {
    await checkRefused(
      'an empty batch',
      "batchSendRecv needs a non-empty array of { op: 'send', tensor, to } and { op: 'recv', into, from } entries, got an empty array",
      () => rr.batchSendRecv([]),
    );
    await checkRefused(
      'an unknown op',
      `batchSendRecv ops[0]: an entry must be { op: 'send', tensor, to, ... } or { op: 'recv', into, from, ... }, got op "isend"`,
      () => rr.batchSendRecv([{ op: 'isend', tensor: new Float32Array(1), to: 0 }] as never),
    );
    await checkRefused(
      'a misspelt key',
      "batchSendRecv ops[0]: unknown key 'tensor' (allowed: op, into, from, tag, timeoutMs, processSet)",
      () => rr.batchSendRecv([{ op: 'recv', tensor: new Float32Array(1), from: 0 }] as never),
    );
    if (size === 1) return;
    await checkRefused(
      'a send to itself',
      `batchSendRecv ops[1]: option 'to' must be another rank in [0, ${size - 1}] (this is rank ${rank}), got ${rank}`,
      () =>
        rr.batchSendRecv([
          { op: 'send', tensor: new Float32Array(1), to: next(rank, size), tag: 41 },
          { op: 'send', tensor: new Float32Array(1), to: rank, tag: 41 },
        ]),
    );
    // Nothing of the refused batches was posted: tag 41 carries exactly this exchange.
    const [, got] = await rr.batchSendRecv([
      { op: 'send', tensor: Float32Array.of(rank + 0.5), to: next(rank, size), tag: 41 },
      { op: 'recv', into: new Float32Array(1), from: previous(rank, size), tag: 41 },
    ]);
    checkJson([...got], [previous(rank, size) + 0.5], 'the batch after the refused ones');
  },
};

const batchMismatch: ConformanceCase = {
  name: 'batchSendRecv: a mismatched entry rejects the batch on both sides with the same MismatchError, once its other entries are done',
  minRanks: 2,
  async run(rr, rank) {
    const tag = 43;
    const outcome =
      rank === 0
        ? await errorOf(() =>
            rr.batchSendRecv([
              { op: 'send', tensor: new Float32Array(4), to: 1, tag },
              { op: 'recv', into: new Int8Array(2), from: 1, tag: tag + 1 },
            ]),
          )
        : rank === 1
          ? await errorOf(() =>
              rr.batchSendRecv([
                { op: 'recv', into: new Float32Array(5), from: 0, tag },
                { op: 'send', tensor: Int8Array.of(7, 8), to: 0, tag: tag + 1 },
              ]),
            )
          : undefined;
    const text = outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : '';
    const texts = await textsOfEveryRank(rr, text, 'p2p-batch-mm');
    // The failed batch's recv took its message: the next one on that tag is the next message.
    const after =
      rank === 0
        ? rr.recv(new Int8Array(2), { from: 1, tag: tag + 1 })
        : rank === 1
          ? rr.send(Int8Array.of(9, 9), { to: 0, tag: tag + 1 }).then(() => undefined)
          : Promise.resolve(undefined);
    const got = await after;
    if (rank > 1) return;
    checkError(
      outcome,
      MismatchError,
      'Mismatched send/recv from rank 0 to rank 1 (tag 43): rank 0 sends 4 float32, rank 1 expects 5 float32.',
      'the batch',
    );
    check(texts[0] === texts[1], 'both sides have the same message', `rank 0 "${texts[0]}", rank 1 "${texts[1]}"`);
    if (got) checkJson([...got], [9, 9], 'the message after the batch');
  },
};

const inProcessSet: ConformanceCase = {
  name: "send/recv in a process set: set ranks, recv from 'any' reports the set rank, messages of the set and of the world on one tag stay apart",
  minRanks: 3,
  async run(rr, rank, size) {
    // Job ranks 1..size-1 in reverse order: set rank i is job rank size-1-i.
    const members = Array.from({ length: size - 1 }, (_, i) => size - 1 - i);
    const set = await rr.addProcessSet(members);
    try {
      const tag = 51;
      if (!set.includes(rank)) {
        await checkRefused(
          'a non-member',
          `rank ${rank} is not in process set ${set.id} (ranks [${members.join(', ')}]): only its members call its collectives`,
          () => rr.send(new Float32Array(1), { to: 0, processSet: set }),
        );
        return;
      }
      const me = set.rank();
      const [setNext, setPrev] = [next(me, set.size()), previous(me, set.size())];
      await checkRefused(
        'a rank outside the set',
        `option 'to' must be another rank of process set ${set.id} in [0, ${set.size() - 1}] (this is rank ${me}), got ${set.size()}`,
        () => rr.send(new Float32Array(1), { to: set.size(), processSet: set }),
      );
      // The same tag in the world and in the set, between the same job ranks: each recv gets its own.
      const jobNext = members[setNext] as number;
      const jobPrev = members[setPrev] as number;
      const [, , inSet, inWorld] = await Promise.all([
        rr.send(Float32Array.of(1000 + me), { to: setNext, tag, processSet: set }),
        rr.send(Float32Array.of(-rank), { to: jobNext, tag }),
        rr.recv(new Float32Array(1), { from: 'any', tag, processSet: set }),
        rr.recv(new Float32Array(1), { from: jobPrev, tag }),
      ]);
      checkJson({ from: inSet.from, data: [...inSet.data] }, { from: setPrev, data: [1000 + setPrev] }, 'the set message');
      checkJson([...inWorld], [-jobPrev], 'the world message');
      const [, fromBatch] = await rr.batchSendRecv([
        { op: 'send', tensor: Int16Array.of(me), to: setPrev, processSet: set },
        { op: 'recv', into: new Int16Array(1), from: setNext, processSet: set },
      ]);
      checkJson([...fromBatch], [setNext], 'a batch in the set');
    } finally {
      await rr.removeProcessSet(set);
    }
  },
};

const batchSync: ConformanceCase = {
  name: 'batchSendRecvSync: a ring of blocking calls posted as one batch completes (sendSync then recvSync would deadlock)',
  needsSync: true,
  async run(rr, rank, size) {
    if (size === 1) {
      await checkRefused(
        'a batch on one rank',
        "batchSendRecv ops[0]: option 'from' is 'any', but the job has no other rank to receive from",
        () => rr.batchSendRecvSync([{ op: 'recv', into: new Float32Array(1), from: 'any' }]),
      );
      return;
    }
    const into = allocShared('float64', 2) as Float64Array;
    const [, got] = rr.batchSendRecvSync([
      { op: 'send', tensor: Float64Array.of(rank, 0.25), to: next(rank, size), tag: 61 },
      { op: 'recv', into, from: 'any', tag: 61 },
    ]);
    await part('the ring', async () => {
      checkJson(got.from, previous(rank, size), 'the sender');
      checkJson([...got.data], [previous(rank, size), 0.25], 'the values');
    });
  },
};

export const pointToPointPatternCases: readonly ConformanceCase[] = [
  anySource,
  anyAndNamed,
  batchRing,
  batchRefused,
  batchMismatch,
  inProcessSet,
  batchSync,
];
