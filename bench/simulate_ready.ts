/**
 * Simulated ready rounds: the real ReadyRounds over each exchange (all-to-all, recursive
 * doubling) on the simulator's control plane (src/transport/sim/), from 2 to 1024 ranks. Every
 * rank has the same 100 cached ids ready at time 0 (a model's gradients); a round's time is when
 * the last rank has closed it. Messages cost α + b·β as in bench/simulate.ts, plus `o` seconds of
 * the sender's and the receiver's CPU per message (encoding, the system call, decoding and the
 * engine's handling; the α-β table has none), during which that rank sends nothing else.
 * Prints the markdown table of docs/performance.md's "The control plane" (all-to-all against
 * recursive doubling); the same virtual times every run.
 *
 *   node dist/bench/simulate_ready.js
 */
import { kDefaultCostModel } from '../src/algorithms/cost_model.js';
import { AllToAllExchange } from '../src/engine/ready/ready_all_to_all.js';
import { DoublingExchange } from '../src/engine/ready/ready_doubling.js';
import type { ExchangeMode } from '../src/engine/ready/ready_exchange_mode.js';
import { ReadyRounds } from '../src/engine/ready/ready_rounds.js';
import { decodeControl, encodeControl } from '../src/engine/wire/codec.js';
import type { ControlMessage } from '../src/engine/wire/messages.js';
import { createSimWorld, type SimTransport } from '../src/transport/sim/index.js';

const kRanks = [2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024];
const kModes: readonly ExchangeMode[] = ['all-to-all', 'recursive-doubling'];
/** Per-message CPU costs simulated, seconds. */
const kOverheads = [0, 2e-6, 4e-6];
const kReadyIds = 100;

interface Outcome {
  seconds: number;
  /** Messages the busiest rank sent. */
  maxSent: number;
}

/** One ready round on `ranks` simulated ranks. */
async function round(mode: ExchangeMode, ranks: number, overhead: number): Promise<Outcome> {
  const { alpha, beta } = kDefaultCostModel;
  const world = createSimWorld(ranks, { network: { local: { alpha, beta } } });
  const sent = new Array<number>(ranks).fill(0);
  let open = ranks;
  let last = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const members = world.map((t: SimTransport) => {
    const send = (peer: number, message: ControlMessage) => {
      t.spend(overhead);
      sent[t.rank]++;
      void t.sendControl(peer, encodeControl(message));
    };
    let receive: (peer: number, message: ControlMessage) => void;
    let rounds: ReadyRounds;
    if (mode === 'all-to-all') {
      const exchange = new AllToAllExchange(t.rank, ranks, (r, ids) => {
        for (let peer = 0; peer < ranks; peer++)
          if (peer !== t.rank) send(peer, { type: 'ready', round: r, ids: [...ids], eager: [] });
        return ids;
      });
      rounds = new ReadyRounds(ranks, exchange);
      receive = (peer, m) => m.type === 'ready' && exchange.receive(peer, m.round, m.ids, rounds.closed);
    } else {
      const exchange = new DoublingExchange(
        t.rank,
        ranks,
        (ready) => ({ ids: [...ready], eager: [] }),
        (peer, step) => send(peer, { type: 'ready-step', ...step }),
      );
      rounds = new ReadyRounds(ranks, exchange);
      receive = (peer, m) => m.type === 'ready-step' && exchange.receive(peer, m, rounds.closed);
    }
    const advance = () => {
      const closed = rounds.advance();
      if (!closed) return;
      if (closed.agreed.length !== kReadyIds) throw new Error(`rank ${t.rank} agreed on ${closed.agreed.length} ids`);
      last = Math.max(last, t.now());
      if (--open === 0) done();
    };
    t.onControl((peer, payload) => {
      t.spend(overhead);
      receive(peer, decodeControl(payload));
      advance();
    });
    return { rounds, advance };
  });
  for (const m of members) {
    for (let id = 0; id < kReadyIds; id++) m.rounds.add(id);
    m.advance();
  }
  await finished;
  await world.closeAll();
  return { seconds: last, maxSent: Math.max(...sent) };
}

function micros(seconds: number): string {
  return `${(seconds * 1e6).toPrecision(3)} µs`;
}

async function main(): Promise<void> {
  const header = kOverheads.flatMap((o) =>
    kModes.map((m) => `${m === 'all-to-all' ? 'all-to-all' : 'rec. doubling'}, o = ${o * 1e6} µs`),
  );
  const lines = [
    `| N | messages per rank: all-to-all · rec. doubling | ${header.join(' | ')} |`,
    `|---:|---:|${header.map(() => '---:').join('|')}|`,
  ];
  for (const ranks of kRanks) {
    const cells: string[] = [];
    let counts = '';
    for (const overhead of kOverheads) {
      const outcomes = [];
      for (const mode of kModes) outcomes.push(await round(mode, ranks, overhead));
      counts = outcomes.map((o) => o.maxSent).join(' · ');
      const best = Math.min(...outcomes.map((o) => o.seconds));
      for (const o of outcomes) cells.push(o.seconds === best ? `**${micros(o.seconds)}**` : micros(o.seconds));
    }
    lines.push(`| ${ranks} | ${counts} | ${cells.join(' | ')} |`);
  }
  console.log(lines.join('\n'));
}

await main();
