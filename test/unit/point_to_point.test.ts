/**
 * send and recv between two ranks (engine/execution/point_to_point.ts), on engines over the memory
 * transport: matching by (sender, receiver, tag) in call order, mismatches on both sides, the
 * deadlines of unmatched calls and withdrawn offers, a dead peer, no mixing with collectives, recvs
 * from any rank and messages of a process set.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { fromErrorRecord } from '../../src/core/errors.js';
import type { DType } from '../../src/core/types.js';
import type { FromEngine } from '../../src/engine/threads/worker_protocol.js';
import { kAnyPeer, type PeerCall } from '../../src/engine/wire/peer_request.js';
import { allreduceRequest, startEngines, stopEngines, type TestRank } from '../helpers/engines.js';

// The engines' timers do not keep a process alive (sockets do, and here there are none).
const keepAlive = setInterval(() => {}, 50);
after(() => clearInterval(keepAlive));

let calls = 0;
function peer(op: 'send' | 'recv', other: number, tag: number, length: number, dtype: DType = 'float32'): PeerCall {
  return { op, name: `${op} ${other} ${tag} #${calls++}`, peer: other, tag, dtype, length };
}

function shared(values: number[]): Float32Array {
  const array = new Float32Array(new SharedArrayBuffer(4 * values.length));
  array.set(values);
  return array;
}

function errorOf(message: FromEngine): Error {
  assert.equal(message.type, 'failed', `expected a failure, got ${JSON.stringify(message)}`);
  return fromErrorRecord((message as FromEngine & { type: 'failed' }).error);
}

async function withEngines(size: number, stallTimeoutMs: number, body: (ranks: TestRank[]) => Promise<void>) {
  const ranks = startEngines(size, { stallTimeoutMs });
  try {
    await body(ranks);
  } finally {
    await stopEngines(ranks);
  }
}

test('messages of one (sender, tag) arrive in order; tags are independent of each other', async () => {
  await withEngines(2, 5000, async ([a, b]) => {
    const [r0, r1] = [a as TestRank, b as TestRank];
    // Tag 1's recvs are posted first, tag 0's sends made first: matching goes by tag, not by arrival.
    const into = [shared([0, 0]), shared([0, 0]), shared([0, 0]), shared([0, 0])];
    const recvs = [
      r1.submit(peer('recv', 0, 1, 2), into[0]),
      r1.submit(peer('recv', 0, 1, 2), into[1]),
      r1.submit(peer('recv', 0, 0, 2), into[2]),
      r1.submit(peer('recv', 0, 0, 2), into[3]),
    ];
    const sends = [
      r0.submit(peer('send', 1, 0, 2), shared([1, 1])),
      r0.submit(peer('send', 1, 0, 2), shared([2, 2])),
      r0.submit(peer('send', 1, 1, 2), shared([3, 3])),
      r0.submit(peer('send', 1, 1, 2), shared([4, 4])),
    ];
    const done = await Promise.all([...sends, ...recvs]);
    assert.deepEqual(
      done.map((m) => m.type),
      new Array(8).fill('done'),
    );
    assert.deepEqual(
      into.map((x) => x[0]),
      [3, 4, 1, 2],
    );
  });
});

test('a length or dtype mismatch rejects on both sides with the same MismatchError, and the next pair matches', async () => {
  await withEngines(3, 5000, async ([a, , c]) => {
    const [r0, r2] = [a as TestRank, c as TestRank];
    const [sent, received] = await Promise.all([
      r0.submit(peer('send', 2, 5, 4), shared([1, 2, 3, 4])),
      r2.submit(peer('recv', 0, 5, 3), shared([0, 0, 0])),
    ]);
    const [e1, e2] = [errorOf(sent), errorOf(received)];
    assert.equal(e1.name, 'MismatchError');
    assert.equal(e1.message, e2.message);
    assert.match(e1.message, /from rank 0 to rank 2 \(tag 5\): rank 0 sends 4 float32, rank 2 expects 3 float32/);
    const [s, r] = await Promise.all([
      r0.submit(peer('send', 2, 5, 2, 'int32'), new Int32Array(new SharedArrayBuffer(8)).fill(7)),
      r2.submit(peer('recv', 0, 5, 2, 'float32'), shared([0, 0])),
    ]);
    assert.match(errorOf(s).message, /sends 2 int32, rank 2 expects 2 float32/);
    assert.equal(errorOf(r).name, 'MismatchError');
    const into = shared([0]);
    const ok = await Promise.all([r0.submit(peer('send', 2, 5, 1), shared([9])), r2.submit(peer('recv', 0, 5, 1), into)]);
    assert.deepEqual(
      ok.map((m) => m.type),
      ['done', 'done'],
    );
    assert.equal(into[0], 9);
  });
});

test('an unmatched recv and an unmatched send time out naming the peer and tag; a withdrawn offer is never matched', async () => {
  await withEngines(2, 300, async ([a, b]) => {
    const [r0, r1] = [a as TestRank, b as TestRank];
    const recv = errorOf(await r1.submit(peer('recv', 0, 3, 1), shared([0])));
    assert.equal(recv.name, 'TimeoutError');
    assert.match(recv.message, /recv of 1 float32 from rank 0 \(tag 3\): rank 0 sent nothing within 300 ms/);
    const send = errorOf(await r0.submit(peer('send', 1, 3, 1), shared([1])));
    assert.equal(send.name, 'TimeoutError');
    assert.match(send.message, /send of 1 float32 to rank 1 \(tag 3\): rank 1 posted no matching recv within 300 ms/);
    // The timed-out send's offer was withdrawn before it failed: this recv gets the next send's data.
    const into = shared([0]);
    const [r, s] = await Promise.all([r1.submit(peer('recv', 0, 3, 1), into), r0.submit(peer('send', 1, 3, 1), shared([2]))]);
    assert.deepEqual([r.type, s.type], ['done', 'done'], JSON.stringify([r, s]));
    // A send whose offer a recv took just before the deadline still completes: the receiver decides.
    const late = shared([0]);
    const lateSend = r0.submit(peer('send', 1, 4, 1), shared([6]));
    await new Promise((resolve) => setTimeout(resolve, 290));
    const [ls, lr] = await Promise.all([lateSend, r1.submit(peer('recv', 0, 4, 1), late)]);
    assert.deepEqual([ls.type, lr.type], ['done', 'done'], JSON.stringify([ls, lr]));
    assert.equal(late[0], 6);
    assert.equal(into[0], 2);
  });
});

test('sends and recvs run beside collectives without mixing their messages', async () => {
  await withEngines(2, 5000, async (ranks) => {
    const [r0, r1] = ranks as [TestRank, TestRank];
    const n = 300_000;
    const big = (v: number) => shared(new Array(n).fill(v));
    const reduced = ranks.map((_, rank) => big(rank + 1));
    const into = big(0);
    const done = await Promise.all([
      ...ranks.map((r, rank) => r.submit(allreduceRequest('g', n), reduced[rank])),
      r0.submit(peer('send', 1, 0, n), big(5)),
      r1.submit(peer('recv', 0, 0, n), into),
    ]);
    assert.ok(done.every((m) => m.type === 'done'));
    assert.ok(reduced.every((x) => x.every((v) => v === 3)));
    assert.ok(into.every((v) => v === 5));
  });
});

test('a dead peer fails the sends and recvs pending with it', async () => {
  const ranks = startEngines(2, { stallTimeoutMs: 5000 });
  const [r0, r1] = ranks as [TestRank, TestRank];
  const pending = r0.submit(peer('recv', 1, 0, 1), shared([0]));
  await new Promise((resolve) => setTimeout(resolve, 20));
  await r1.transport.close();
  const error = errorOf(await pending);
  assert.equal(error.name, 'PeerFailureError');
  await stopEngines([r0]);
});

test("a recv from any rank times out saying so; a process set's messages match only its own recvs, named by set ranks", async () => {
  const ranks = startEngines(4, { stallTimeoutMs: 5000, processSets: [[1, 3]] });
  try {
    const [, r1, , r3] = ranks as [TestRank, TestRank, TestRank, TestRank];
    const any = errorOf(await r3.submit({ ...peer('recv', kAnyPeer, 3, 2), timeoutMs: 60 }, shared([0, 0])));
    assert.equal(any.name, 'TimeoutError');
    assert.equal(any.message, 'recv of 2 float32 from any rank (tag 3): no rank sent a message within 60 ms');
    // Job rank 1 sends in set 1 (where job rank 3 is rank 1): the world's recv on the same tag does not take it.
    const world = r3.submit({ ...peer('recv', 1, 0, 1), timeoutMs: 200 }, shared([0]));
    const into = shared([0]);
    const [sent, got] = await Promise.all([
      r1.submit({ ...peer('send', 3, 0, 1), set: 1 }, shared([4])),
      r3.submit({ ...peer('recv', kAnyPeer, 0, 1), set: 1 }, into),
    ]);
    assert.deepEqual([sent.type, got], ['done', { type: 'done', id: (got as { id: number }).id, counts: [1] }]);
    assert.equal(into[0], 4);
    assert.equal(errorOf(await world).message, 'recv of 1 float32 from rank 1 (tag 0): rank 1 sent nothing within 200 ms');
    const [s, r] = await Promise.all([
      r1.submit({ ...peer('send', 3, 0, 2), set: 1 }, shared([1, 2])),
      r3.submit({ ...peer('recv', 1, 0, 3), set: 1 }, shared([0, 0, 0])),
    ]);
    const message =
      'Mismatched send/recv from rank 0 to rank 1 of process set 1 (tag 0): rank 0 sends 2 float32, rank 1 expects 3 float32.';
    assert.deepEqual([errorOf(s).message, errorOf(r).message], [message, message]);
    const late = errorOf(await r1.submit({ ...peer('send', 3, 9, 1), set: 1, timeoutMs: 60 }, shared([1])));
    assert.equal(
      late.message,
      'send of 1 float32 to rank 1 of process set 1 (tag 9): rank 1 posted no matching recv within 60 ms',
    );
  } finally {
    await stopEngines(ranks);
  }
});
