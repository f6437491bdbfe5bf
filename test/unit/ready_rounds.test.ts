/**
 * Ready rounds in isolation: N instances exchange contributions through a message queue that
 * delivers in a random (seeded) interleaving, as separate links would. Every rank must agree on
 * the same ids in the same order, every id ready everywhere must be agreed, and an idle world
 * must send nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { ReadyRounds } from '../../src/engine/ready_rounds.js';

interface Message {
  from: number;
  to: number;
  round: number;
  ids: readonly number[];
}

/**
 * `cap`: at most this many ids reported for the first time per report, as when the eager
 * buffers of more would not fit one message (the engine then reports a prefix of its ready ids).
 */
function world(size: number, cap?: number) {
  const sentBefore = Array.from({ length: size }, () => new Set<number>());
  const inFlight: Message[] = [];
  const agreed: number[][] = Array.from({ length: size }, () => []);
  const ranks = Array.from(
    { length: size },
    (_, rank) =>
      new ReadyRounds(rank, size, (round, ready) => {
        const sent = sentBefore[rank] as Set<number>;
        let fresh = 0;
        const end = ready.findIndex((id) => !sent.has(id) && ++fresh > (cap ?? Number.POSITIVE_INFINITY));
        const ids = end < 0 ? ready : ready.slice(0, end);
        for (const id of ids) sent.add(id);
        for (let to = 0; to < size; to++) if (to !== rank) inFlight.push({ from: rank, to, round, ids: [...ids] });
        return ids;
      }),
  );
  const advance = (rank: number) => {
    for (let closed = ranks[rank]?.advance(); closed; closed = ranks[rank]?.advance()) {
      agreed[rank]?.push(...closed.agreed);
      for (const id of closed.agreed) sentBefore[rank]?.delete(id);
    }
  };
  /** Delivers one message, picked by `pick` among those at the head of their link (links are FIFO). */
  const deliverOne = (pick: number) => {
    const heads = inFlight.filter((m, i) => inFlight.findIndex((o) => o.from === m.from && o.to === m.to) === i);
    const m = heads[pick % heads.length] as Message;
    inFlight.splice(inFlight.indexOf(m), 1);
    ranks[m.to]?.onContribution(m.from, m.round, m.ids);
    advance(m.to);
  };
  return { ranks, inFlight, agreed, advance, deliverOne };
}

test('random readiness and delivery orders: every rank agrees on the same sequence, and every id is agreed', () => {
  for (let seed = 1; seed <= 200; seed++) {
    let s = seed;
    const random = (n: number) => {
      s = (s * 1103515245 + 12345) & 0x7fffffff;
      return (s >>> 16) % n; // the low bits of this generator repeat with short periods
    };
    const size = 2 + (seed % 4);
    const ids = 1 + random(20);
    const w = world(size, seed % 3 === 0 ? 1 + (seed % 4) : undefined);
    // Each rank makes the ids ready in its own order, interleaved with deliveries.
    const todo = Array.from({ length: size }, () => Array.from({ length: ids }, (_, i) => i).sort(() => random(3) - 1));
    while (todo.some((list) => list.length > 0) || w.inFlight.length > 0) {
      const pending = todo.map((list, rank) => (list.length > 0 ? rank : -1)).filter((r) => r >= 0);
      if (w.inFlight.length > 0 && (pending.length === 0 || random(2) === 0)) {
        w.deliverOne(random(1000));
      } else {
        const rank = pending[random(pending.length)] as number;
        w.ranks[rank]?.add(todo[rank]?.shift() as number);
        w.advance(rank);
      }
    }
    for (let rank = 0; rank < size; rank++) {
      assert.deepEqual(w.agreed[rank], w.agreed[0], `seed ${seed}: rank ${rank} agreed in another order`);
    }
    assert.deepEqual(
      [...(w.agreed[0] ?? [])].sort((a, b) => a - b),
      Array.from({ length: ids }, (_, i) => i),
      `seed ${seed}`,
    );
  }
});

test('an idle world sends nothing; a rank waiting for a late peer sends nothing more', () => {
  const w = world(3);
  for (const rank of [0, 1, 2]) w.advance(rank);
  assert.equal(w.inFlight.length, 0);
  w.ranks[0]?.add(5);
  w.advance(0);
  assert.equal(w.inFlight.length, 2, 'rank 0 reported id 5 to both peers');
  while (w.inFlight.length > 0) w.deliverOne(0);
  assert.deepEqual(w.agreed, [[], [], []], 'nobody else has id 5: nothing agreed');
  const sent = w.inFlight.length;
  for (const rank of [0, 1, 2]) w.advance(rank);
  assert.equal(w.inFlight.length, sent, 'no new round without new readiness');
  w.ranks[1]?.add(5);
  w.ranks[2]?.add(5);
  w.advance(1);
  w.advance(2);
  while (w.inFlight.length > 0) w.deliverOne(1);
  assert.deepEqual(w.agreed, [[5], [5], [5]]);
});

test('a blocked id is ignored by the next close on every rank, and a resubmission reopens a round', () => {
  const w = world(2);
  for (const rank of [0, 1]) {
    w.ranks[rank]?.add(3);
    w.advance(rank);
  }
  // Both reported id 3; before the round closes, id 3 fails on both (a decision of rank 0).
  for (const rank of [0, 1]) {
    w.ranks[rank]?.remove(3);
    w.ranks[rank]?.block(3);
  }
  // Rank 1 resubmits it at once.
  w.ranks[1]?.add(3);
  while (w.inFlight.length > 0) w.deliverOne(0);
  assert.deepEqual(w.agreed, [[], []], 'the blocked id ran nowhere');
  w.ranks[0]?.add(3);
  w.advance(0);
  while (w.inFlight.length > 0) w.deliverOne(0);
  assert.deepEqual(w.agreed, [[3], [3]]);
});

test('a contribution for a round a peer cannot be in, or twice for one round, is a protocol error', () => {
  const rounds = new ReadyRounds(0, 3, () => []);
  assert.throws(() => rounds.onContribution(1, 2, []), ProtocolError);
  rounds.onContribution(1, 1, []);
  assert.throws(() => rounds.onContribution(1, 1, [4]), /twice/);
});

test('a rank with nothing pending holds back its answer until it submits or is told to answer', () => {
  const sent: { from: number; round: number; ids: readonly number[] }[] = [];
  let idle = true;
  const a = new ReadyRounds(0, 2, (round, ids) => {
    sent.push({ from: 0, round, ids });
    return ids;
  });
  const b = new ReadyRounds(
    1,
    2,
    (round, ids) => {
      sent.push({ from: 1, round, ids });
      return ids;
    },
    () => !idle,
  );
  a.add(1);
  a.advance();
  b.onContribution(0, 0, [1]);
  assert.equal(b.advance(), undefined);
  assert.ok(b.holdingAnswer);
  assert.equal(sent.length, 1, 'b holds its answer: the round could only close empty');
  // b's caller submits: b answers with it, and the round agrees on it at once.
  idle = false;
  b.add(1);
  assert.deepEqual(b.advance()?.agreed, [1]);
  // Another round opened by a, while b is idle again: the grace timer makes b answer empty.
  idle = true;
  a.onContribution(1, 0, [1]);
  assert.deepEqual(a.advance()?.agreed, [1]);
  a.add(2);
  a.advance();
  b.onContribution(0, 1, [2]);
  assert.equal(b.advance(), undefined);
  b.answerNow();
  const closed = b.advance();
  assert.deepEqual(closed?.agreed, []);
  assert.deepEqual([...(closed?.partial.entries() ?? [])], [[2, [0]]], 'id 2 waits for rank 1');
});
