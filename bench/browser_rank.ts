/**
 * The program of `node dist/bench/browser_links.js` (browser_links.ts runs it under ringrun
 * --browser on Node ranks and tabs alike; nothing of Node's in it). Its arguments
 * (rr.programArgs()): `--mib M` (default 16), `--pairs a-b,...` (point-to-point links to time,
 * each in both directions), `--reps R` (large transfers per figure, default 4), `--small N`
 * (4-byte allreduces, default 300). Rank 0 prints one BENCH-RESULT line:
 *
 * - `links`: for each pair and direction, MB/s of `--mib` MiB messages sent with rr.send and
 *   received with rr.recv into a reused buffer, timed by the receiver over `--reps` messages;
 * - `rtts`: for each pair a-b, the median round trip (µs) of a 4-byte rr.send and rr.recv, `--small` times;
 * - `allreduce`: the mean ms of a `--mib` MiB float32 allreduce into a reused `out`, and its
 *   bus bandwidth (2(N-1)/N × bytes / time, what each link carries);
 * - `small`: p50 and mean µs of a named 4-byte allreduce.
 */
import * as rr from '../src/index.js';

const args = rr.programArgs();
const value = (flag: string, fallback: string) => {
  const at = args.indexOf(flag);
  return at >= 0 ? (args[at + 1] ?? fallback) : fallback;
};
const mib = Number(value('--mib', '16'));
const reps = Number(value('--reps', '4'));
const small = Number(value('--small', '300'));
const pairs = value('--pairs', '')
  .split(',')
  .filter((p) => p !== '')
  .map((p) => p.split('-').map(Number) as [number, number]);

await rr.init();
const rank = rr.rank();
const size = rr.size();
const bytes = mib * 1024 * 1024;

/** MB/s from `from` to `to`, as the receiver sees it; undefined on other ranks. */
async function link(from: number, to: number, tag: number): Promise<number | undefined> {
  const buffer = new Uint8Array(new SharedArrayBuffer(bytes));
  // One message first: the link and the engine's buffers warm.
  if (rank === from) await rr.send(buffer, { to, tag });
  if (rank === to) await rr.recv(buffer, { from, tag });
  await rr.barrier({ name: `link/${from}-${to}/start` });
  let rate: number | undefined;
  if (rank === from) for (let i = 0; i < reps; i++) await rr.send(buffer, { to, tag });
  if (rank === to) {
    const started = performance.now();
    for (let i = 0; i < reps; i++) await rr.recv(buffer, { from, tag });
    rate = (reps * bytes) / (performance.now() - started) / 1000;
  }
  await rr.barrier({ name: `link/${from}-${to}/end` });
  return rate;
}

const links: Record<string, number> = {};
let tag = 10;
for (const [a, b] of pairs) {
  for (const [from, to] of [
    [a, b],
    [b, a],
  ] as const) {
    const rate = await link(from, to, tag++);
    const all = await rr.allgatherObject(rate ?? null, { name: `link/${from}-${to}/rate` });
    const seen = all.find((r) => r !== null);
    if (typeof seen === 'number') links[`${from}->${to}`] = seen;
  }
}

/** The median round trip (µs) of 4-byte messages between `a` and `b`, as `a` sees it; undefined on other ranks. */
async function roundTrip(a: number, b: number, tag: number): Promise<number | undefined> {
  const ping = new Uint8Array(new SharedArrayBuffer(4));
  const times: number[] = [];
  for (let i = 0; i < small + 20; i++) {
    if (rank === a) {
      const started = performance.now();
      await rr.send(ping, { to: b, tag });
      await rr.recv(ping, { from: b, tag });
      if (i >= 20) times.push(performance.now() - started);
    } else if (rank === b) {
      await rr.recv(ping, { from: a, tag });
      await rr.send(ping, { to: a, tag });
    }
  }
  times.sort((x, y) => x - y);
  return rank === a ? (times[Math.floor(times.length / 2)] ?? 0) * 1000 : undefined;
}

const rtts: Record<string, number> = {};
for (const [a, b] of pairs) {
  const rtt = await roundTrip(a, b, tag++);
  const all = await rr.allgatherObject(rtt ?? null, { name: `rtt/${a}-${b}` });
  const seen = all.find((r) => r !== null);
  if (typeof seen === 'number') rtts[`${a}-${b}`] = seen;
}

const tensor = new Float32Array(bytes / 4).fill(1);
const out = new Float32Array(new SharedArrayBuffer(bytes));
await rr.allreduce(tensor, { name: 'large', out });
await rr.barrier({ name: 'large/start' });
let started = performance.now();
for (let i = 0; i < reps; i++) await rr.allreduce(tensor, { name: 'large', out });
const largeMs = (performance.now() - started) / reps;

const one = new Float32Array([1]);
const oneOut = new Float32Array(new SharedArrayBuffer(4));
const times: number[] = [];
for (let i = 0; i < 20; i++) await rr.allreduce(one, { name: 'small', out: oneOut });
for (let i = 0; i < small; i++) {
  started = performance.now();
  await rr.allreduce(one, { name: 'small', out: oneOut });
  times.push(performance.now() - started);
}
times.sort((x, y) => x - y);
const timesOf = await rr.allgatherObject(
  { p50: (times[Math.floor(times.length / 2)] ?? 0) * 1000, mean: (times.reduce((s, t) => s + t, 0) / times.length) * 1000 },
  { name: 'small/times' },
);
const largeOf = await rr.allgatherObject(largeMs, { name: 'large/times' });

if (rank === 0) {
  const slowestLarge = Math.max(...(largeOf as number[]));
  const result = {
    size,
    mib,
    links,
    rtts,
    allreduce: { ms: slowestLarge, busMBps: ((2 * (size - 1)) / size) * (bytes / slowestLarge / 1000) },
    small: {
      p50: Math.max(...(timesOf as { p50: number }[]).map((t) => t.p50)),
      mean: Math.max(...(timesOf as { mean: number }[]).map((t) => t.mean)),
    },
  };
  console.log(`BENCH-RESULT ${JSON.stringify(result)}`);
}
await rr.shutdown();
