/**
 * Ready rounds in isolation: N instances exchange contributions through a message queue that
 * delivers in a random (seeded) interleaving, as separate links would. Every rank must agree on
 * the same ids in the same order, every id ready everywhere must be agreed, and an idle world
 * must send nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { AllToAllExchange } from '../../src/engine/ready/ready_all_to_all.js';
import { DoublingExchange, doublingSchedule } from '../../src/engine/ready/ready_doubling.js';
import { exchangeModeFor, kAllToAllMaxRanks } from '../../src/engine/ready/ready_exchange_mode.js';
import { ReadyRounds } from '../../src/engine/ready/ready_rounds.js';
import type { StepMessage } from '../../src/engine/wire/messages.js';

type Mode = 'all-to-all' | 'recursive-doubling';
const kModes: readonly Mode[] = ['all-to-all', 'recursive-doubling'];

interface Message {
  from: number;
  to: number;
  deliver: () => void;
}

/** One rank: its rounds and the exchange they run over (either mode). */
interface Member {
  rounds: ReadyRounds;
  /** Hands a message of this rank's exchange to it. */
  receive: (from: number, message: unknown) => void;
}

function member(
  mode: Mode,
  rank: number,
  size: number,
  prepare: (ready: readonly number[]) => number[],
  send: (to: number, message: unknown) => void,
  busy?: () => boolean,
): Member {
  if (mode === 'all-to-all') {
    const exchange = new AllToAllExchange(rank, size, (round, ready) => {
      const ids = prepare(ready);
      for (let to = 0; to < size; to++) if (to !== rank) send(to, { round, ids: [...ids] });
      return ids;
    });
    const rounds = new ReadyRounds(size, exchange, busy);
    const receive = (from: number, m: unknown) => {
      const { round, ids } = m as { round: number; ids: number[] };
      exchange.receive(from, round, ids, rounds.closed);
    };
    return { rounds, receive };
  }
  const exchange = new DoublingExchange(rank, size, (ready) => ({ ids: prepare(ready), eager: [] }), send);
  const rounds = new ReadyRounds(size, exchange, busy);
  return { rounds, receive: (from, m) => exchange.receive(from, m as StepMessage, rounds.closed) };
}

/**
 * `cap`: at most this many ids reported for the first time per report, as when the eager
 * buffers of more would not fit one message (the engine then reports a prefix of its ready ids).
 */
function world(mode: Mode, size: number, cap?: number) {
  const sentBefore = Array.from({ length: size }, () => new Set<number>());
  const inFlight: Message[] = [];
  const agreed: number[][] = Array.from({ length: size }, () => []);
  const partial: ReadonlyMap<number, readonly number[]>[] = [];
  const members: Member[] = [];
  for (let rank = 0; rank < size; rank++) {
    const prepare = (ready: readonly number[]) => {
      const sent = sentBefore[rank] as Set<number>;
      let fresh = 0;
      const end = ready.findIndex((id) => !sent.has(id) && ++fresh > (cap ?? Number.POSITIVE_INFINITY));
      const ids = end < 0 ? [...ready] : ready.slice(0, end);
      for (const id of ids) sent.add(id);
      return ids;
    };
    const send = (to: number, message: unknown) => {
      inFlight.push({ from: rank, to, deliver: () => members[to]?.receive(rank, message) });
    };
    members.push(member(mode, rank, size, prepare, send));
  }
  const ranks = members.map((m) => m.rounds);
  const advance = (rank: number) => {
    for (let closed = ranks[rank]?.advance(); closed; closed = ranks[rank]?.advance()) {
      agreed[rank]?.push(...closed.agreed);
      if (rank === 0) partial.push(closed.partial);
      for (const id of closed.agreed) sentBefore[rank]?.delete(id);
    }
  };
  /** Delivers one message, picked by `pick` among those at the head of their link (links are FIFO). */
  const deliverOne = (pick: number) => {
    const heads = inFlight.filter((m, i) => inFlight.findIndex((o) => o.from === m.from && o.to === m.to) === i);
    const m = heads[pick % heads.length] as Message;
    inFlight.splice(inFlight.indexOf(m), 1);
    m.deliver();
    advance(m.to);
  };
  return { ranks, inFlight, agreed, partial, advance, deliverOne };
}

for (const mode of kModes) {
  test(`${mode}: random readiness and delivery orders: every rank agrees on the same sequence, and every id is agreed`, () => {
    for (let seed = 1; seed <= 200; seed++) {
      let s = seed;
      const random = (n: number) => {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        return (s >>> 16) % n; // the low bits of this generator repeat with short periods
      };
      // Recursive doubling: powers of two and not, with extra ranks folded in.
      const size = 2 + (seed % (mode === 'all-to-all' ? 4 : 11));
      const ids = 1 + random(20);
      const w = world(mode, size, seed % 3 === 0 ? 1 + (seed % 4) : undefined);
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

  test(`${mode}: an idle world sends nothing; a rank waiting for a late peer sends nothing more`, () => {
    const w = world(mode, 3);
    for (const rank of [0, 1, 2]) w.advance(rank);
    assert.equal(w.inFlight.length, 0);
    w.ranks[0]?.add(5);
    w.advance(0);
    // All-to-all: to both peers; recursive doubling: a notice to its extra rank 2, which opens the round.
    assert.equal(w.inFlight.length, mode === 'all-to-all' ? 2 : 1);
    while (w.inFlight.length > 0) w.deliverOne(0);
    assert.deepEqual(w.agreed, [[], [], []], 'nobody else has id 5: nothing agreed');
    assert.deepEqual([...(w.partial.at(-1)?.entries() ?? [])], [[5, [0]]], 'rank 0 knows who has id 5');
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

  test(`${mode}: a blocked id is ignored by the next close on every rank, and a resubmission reopens a round`, () => {
    const w = world(mode, 2);
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
}

test('all-to-all: a contribution for a round a peer cannot be in, or twice for one round, is a protocol error', () => {
  const exchange = new AllToAllExchange(0, 3, () => []);
  assert.throws(() => exchange.receive(1, 2, [], 0), ProtocolError);
  exchange.receive(1, 1, [], 0);
  assert.throws(() => exchange.receive(1, 1, [4], 0), /twice/);
});

test('recursive doubling: a step from the wrong peer, for a round a peer cannot be in, or twice, is a protocol error', () => {
  const exchange = new DoublingExchange(
    0,
    4,
    (ready) => ({ ids: [...ready], eager: [] }),
    () => {},
  );
  const step = (round: number, n: number): StepMessage => ({
    round,
    step: n,
    urgent: false,
    ids: [],
    decisions: 0,
    contributions: [],
    eager: [],
  });
  assert.throws(() => exchange.receive(1, step(2, 1), 0), ProtocolError);
  assert.throws(() => exchange.receive(3, step(0, 1), 0), /expects from no such peer/);
  exchange.receive(2, step(0, 2), 0);
  assert.throws(() => exchange.receive(2, step(0, 2), 0), /twice/);
});

test('recursive doubling: at most ceil(log2 N) + 1 sends per rank and round, each matched by its receiver', () => {
  for (let size = 1; size <= 70; size++) {
    const bound = Math.ceil(Math.log2(size)) + 1;
    const sends = new Set<string>();
    const recvs = new Set<string>();
    for (let rank = 0; rank < size; rank++) {
      const actions = doublingSchedule(rank, size);
      assert.ok(actions.filter((a) => a.send).length <= bound, `size ${size} rank ${rank}`);
      for (const a of actions) {
        // A notice (core to extra, step 0) has no receive: the extra takes it as the round's opening.
        if (a.notice) continue;
        // A send that carries contributions meets a receive that expects them, for the sender's block.
        (a.send ? sends : recvs).add(
          a.send ? `${rank}>${a.peer}@${a.step}:${a.carries}` : `${a.peer}>${rank}@${a.step}:${a.carries}`,
        );
      }
    }
    assert.deepEqual([...sends].sort(), [...recvs].sort(), `size ${size}`);
  }
});

for (const mode of kModes) {
  test(`${mode}: rank 0 learns which ranks hold each partial id`, () => {
    const w = world(mode, 6);
    for (let rank = 0; rank < 6; rank++) w.ranks[rank]?.add(rank === 5 ? 9 : 7);
    for (let rank = 0; rank < 6; rank++) w.advance(rank);
    while (w.inFlight.length > 0) w.deliverOne(3);
    assert.deepEqual(w.agreed, [[], [], [], [], [], []]);
    const partial = w.partial.at(-1) as Map<number, number[]>;
    assert.deepEqual(partial.get(7), [0, 1, 2, 3, 4]);
    assert.deepEqual(partial.get(9), [5]);
  });

  test(`${mode}: a rank with nothing pending holds back its answer until it submits or is told to answer`, () => {
    const inFlight: { from: number; to: number; message: unknown }[] = [];
    let idle = true;
    const prepare = (ready: readonly number[]) => [...ready];
    const a = member(mode, 0, 2, prepare, (to, message) => inFlight.push({ from: 0, to, message }));
    const b = member(
      mode,
      1,
      2,
      prepare,
      (to, message) => inFlight.push({ from: 1, to, message }),
      () => !idle,
    );
    const deliver = () => {
      const batch = inFlight.splice(0);
      for (const m of batch) (m.to === 0 ? a : b).receive(m.from, m.message);
      return batch.length;
    };
    a.rounds.add(1);
    a.rounds.advance();
    assert.equal(deliver(), 1);
    assert.equal(b.rounds.advance(), undefined);
    assert.ok(b.rounds.holdingAnswer);
    assert.equal(inFlight.length, 0, 'b holds its answer: the round could only close empty');
    // b's caller submits: b answers with it, and the round agrees on it at once.
    idle = false;
    b.rounds.add(1);
    assert.deepEqual(b.rounds.advance()?.agreed, [1]);
    // Another round opened by a, while b is idle again: the grace timer makes b answer empty.
    idle = true;
    deliver();
    assert.deepEqual(a.rounds.advance()?.agreed, [1]);
    a.rounds.add(2);
    a.rounds.advance();
    deliver();
    assert.equal(b.rounds.advance(), undefined);
    b.rounds.answerNow();
    assert.deepEqual(b.rounds.advance()?.agreed, []);
    deliver();
    const closed = a.rounds.advance();
    assert.deepEqual(closed?.agreed, []);
    assert.deepEqual([...(closed?.partial.entries() ?? [])], [[2, [0]]], 'id 2 waits for rank 1');
  });
}

test('recursive doubling: idle ranks that hear of a round from a rank that answered on its grace timer answer at once', () => {
  const size = 8;
  const inFlight: { from: number; to: number; message: unknown }[] = [];
  const closed: number[] = [];
  const members = Array.from({ length: size }, (_, rank) =>
    member(
      'recursive-doubling',
      rank,
      size,
      (ready) => [...ready],
      (to, message) => inFlight.push({ from: rank, to, message }),
      () => rank === 0,
    ),
  );
  const advance = (rank: number) => {
    if (members[rank]?.rounds.advance()) closed.push(rank);
  };
  members[0]?.rounds.add(4);
  advance(0);
  const drain = () => {
    while (inFlight.length > 0) {
      const m = inFlight.shift() as { from: number; to: number; message: unknown };
      members[m.to]?.receive(m.from, m.message);
      advance(m.to);
    }
  };
  drain();
  const holding = members.flatMap((m, rank) => (m.rounds.holdingAnswer ? [rank] : []));
  assert.deepEqual(holding, [1], 'only rank 1 heard of the round, and holds');
  members[1]?.rounds.answerNow();
  advance(1);
  drain();
  assert.deepEqual(
    closed.sort((x, y) => x - y),
    [0, 1, 2, 3, 4, 5, 6, 7],
    'one grace period: the others answered at once',
  );
});

test("recursive doubling: a rank closes a round only once it has rank 0's decisions sent before rank 0 contributed", () => {
  // Rank 0 published 2 decisions, then contributed; they reach rank 3 directly, its contribution
  // through ranks 1 and 2: rank 3 may have the whole round before the decisions.
  const size = 4;
  const inFlight: { from: number; to: number; message: unknown }[] = [];
  let received = 0;
  const ranks = Array.from({ length: size }, (_, rank) => {
    const exchange = new DoublingExchange(
      rank,
      size,
      (ready) => ({ ids: [...ready], eager: [] }),
      (to, message) => inFlight.push({ from: rank, to, message }),
      () => 2,
    );
    const rounds = new ReadyRounds(size, exchange, () => true, rank === 3 ? () => received : () => 2);
    return { exchange, rounds };
  });
  for (const r of ranks) {
    r.rounds.add(1);
    r.rounds.advance();
  }
  const closed: number[] = [];
  while (inFlight.length > 0) {
    const m = inFlight.shift() as { from: number; to: number; message: unknown };
    const r = ranks[m.to] as (typeof ranks)[number];
    r.exchange.receive(m.from, m.message as StepMessage, r.rounds.closed);
    if (r.rounds.advance()) closed.push(m.to);
  }
  assert.deepEqual(closed.sort(), [0, 1, 2], 'rank 3 holds the round');
  received = 1;
  assert.equal(ranks[3]?.rounds.advance(), undefined);
  received = 2;
  assert.deepEqual(ranks[3]?.rounds.advance()?.agreed, [1]);
});

test("'auto' exchanges all-to-all up to kAllToAllMaxRanks ranks, by recursive doubling above; a forced mode holds at any size", () => {
  assert.equal(exchangeModeFor('auto', 2), 'all-to-all');
  assert.equal(exchangeModeFor('auto', kAllToAllMaxRanks), 'all-to-all');
  assert.equal(exchangeModeFor('auto', kAllToAllMaxRanks + 1), 'recursive-doubling');
  assert.equal(exchangeModeFor('all-to-all', 1024), 'all-to-all');
  assert.equal(exchangeModeFor('recursive-doubling', 2), 'recursive-doubling');
});

test('recursive doubling: rank 0 names the holders of every partial id exactly, for random contributions on 2 to 20 ranks', () => {
  let s = 7;
  const random = (n: number) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return (s >>> 16) % n;
  };
  for (let size = 2; size <= 20; size++) {
    for (let trial = 0; trial < 5; trial++) {
      const w = world('recursive-doubling', size);
      // Some ids everywhere (in the AND), others on random ranks.
      const held = Array.from({ length: size }, () => [
        0,
        1,
        ...Array.from({ length: 6 }, (_, i) => 2 + i).filter(() => random(2) === 0),
      ]);
      for (let rank = 0; rank < size; rank++) for (const id of held[rank] as number[]) w.ranks[rank]?.add(id);
      for (let rank = 0; rank < size; rank++) w.advance(rank);
      while (w.inFlight.length > 0) w.deliverOne(random(1000));
      const want = new Map<number, number[]>();
      for (let id = 2; id < 8; id++) {
        const ranks = held.flatMap((ids, rank) => (ids.includes(id) ? [rank] : []));
        if (ranks.length > 0 && ranks.length < size) want.set(id, ranks);
      }
      const partial = w.partial[0] as Map<number, number[]>;
      assert.deepEqual(new Map([...partial].sort(([a], [b]) => a - b)), want, `size ${size} trial ${trial}`);
      for (const agreed of w.agreed) assert.deepEqual(agreed.slice(0, 2), [0, 1], `size ${size} trial ${trial}`);
    }
  }
});
