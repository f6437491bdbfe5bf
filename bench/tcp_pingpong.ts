/**
 * Small-message latency of the TCP transport: a ping-pong of `bytes`-byte messages between 2
 * processes over 127.0.0.1 (rank 0 sends then receives, rank 1 receives then sends back).
 * Prints the round trip in µs (the median and the best of 5 batches) and rank 0's CPU time per
 * round trip (user + system: less noisy than the wall clock on a shared machine).
 *
 *   node dist/bench/tcp_pingpong.js [rounds=20000] [bytes=4] [mode=transport|raw|raw2] [tags=step|fixed]
 *
 * "raw" is the floor: the same exchange of header-sized frames over bare Node sockets (setNoDelay,
 * 'data' events), in the same harness, on one connection. "raw2" uses one connection per
 * direction, as the transport's mesh does (rendezvous/mesh.ts): every segment then needs an ACK
 * of its own instead of one riding on the reply. "step" gives every round its own tag (as the engine's
 * collectives do); "fixed" reuses tag 0.
 */
import { fork } from 'node:child_process';
import net from 'node:net';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { connectLoopbackPair, freeStorePort } from './loopback_pair.js';

interface Job {
  rank: number;
  port: number;
  rounds: number;
  bytes: number;
  raw: boolean;
  /** raw: one connection per direction. */
  split: boolean;
  stepTags: boolean;
}

interface Result {
  /** µs per round trip, per batch. */
  us: number[];
  /** This process's CPU µs per round trip over all batches. */
  cpuUs: number;
}

const kBatches = 5;
const kWarmupRounds = 2000;

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 20_000);
  const bytes = Number(process.argv[3] ?? 4);
  const raw = process.argv[4] === 'raw' || process.argv[4] === 'raw2';
  const split = process.argv[4] === 'raw2';
  const stepTags = process.argv[5] !== 'fixed';
  const port = await freeStorePort();
  const results = await Promise.all(
    [0, 1].map(
      (rank) =>
        new Promise<Result>((resolve, reject) => {
          const job: Job = { rank, port, rounds, bytes, raw, split, stepTags };
          const child = fork(new URL(import.meta.url), [JSON.stringify(job)]);
          child.once('message', (m) => resolve(m as Result));
          child.once('error', reject);
          child.once('exit', (code) => code !== 0 && reject(new Error(`rank ${rank} exited with ${code}`)));
        }),
    ),
  );
  const { us, cpuUs } = results[0] as Result;
  us.sort((a, b) => a - b);
  const median = us[us.length >> 1] as number;
  console.log(
    `${raw ? (split ? 'raw sockets, a connection per direction' : 'raw sockets') : 'tcp transport'}, ${bytes} B ping-pong, ${rounds} rounds${raw ? '' : stepTags ? ' (a tag per round)' : ' (tag 0)'}: ` +
      `round trip median ${median.toFixed(1)} µs, best ${(us[0] as number).toFixed(1)} µs, CPU ${cpuUs.toFixed(1)} µs per round trip (load ${loadavg()[0]?.toFixed(2)})`,
  );
}

/** Runs `kBatches` timed batches after a warmup. */
async function timed(job: Job, round: (i: number) => Promise<void>): Promise<Result> {
  let i = 0;
  for (let k = 0; k < kWarmupRounds; k++) await round(i++);
  const per = Math.max(1, Math.floor(job.rounds / kBatches));
  const us: number[] = [];
  const cpu = process.cpuUsage();
  for (let b = 0; b < kBatches; b++) {
    const start = performance.now();
    for (let k = 0; k < per; k++) await round(i++);
    us.push(((performance.now() - start) * 1000) / per);
  }
  const used = process.cpuUsage(cpu);
  return { us, cpuUs: (used.user + used.system) / (per * kBatches) };
}

async function transportRank(job: Job): Promise<Result> {
  const { transport, close } = await connectLoopbackPair(job.rank, job.port, 'pingpong');
  const out = new Uint8Array(job.bytes).fill(job.rank + 1);
  const into = new Uint8Array(job.bytes);
  const peer = 1 - job.rank;
  const tag = (i: number) => (job.stepTags ? i : 0);
  const round =
    job.rank === 0
      ? async (i: number) => {
          await transport.send(peer, tag(i), out);
          await transport.recv(peer, tag(i), into);
        }
      : async (i: number) => {
          await transport.recv(peer, tag(i), into);
          await transport.send(peer, tag(i), out);
        };
  const result = await timed(job, round);
  if (job.bytes > 0 && into[0] !== peer + 1) throw new Error('payload check failed');
  // A last exchange so neither rank closes while the other still reads.
  await round(0);
  await close();
  return result;
}

/** The same exchange over bare sockets, frames of 12 + bytes: one connection, or one per direction. */
async function rawRank(job: Job): Promise<Result> {
  const frame = 12 + job.bytes;
  const sockets = await rawConnect(job, job.split ? 2 : 1);
  for (const s of sockets) s.setNoDelay(true);
  // Rank 0 writes on the first connection and reads the last; rank 1 the other way round.
  const [out, inb] = (job.rank === 0 ? [sockets[0], sockets.at(-1)] : [sockets.at(-1), sockets[0]]) as [net.Socket, net.Socket];
  const msg = Buffer.alloc(frame, job.rank + 1);
  let have = 0;
  let wake: (() => void) | null = null;
  inb.on('data', (chunk: Buffer) => {
    have += chunk.length;
    if (have >= frame && wake) {
      have -= frame;
      const w = wake;
      wake = null;
      w();
    }
  });
  const take = () =>
    new Promise<void>((resolve) => {
      if (have >= frame) {
        have -= frame;
        resolve();
      } else wake = resolve;
    });
  const send = () => new Promise<void>((resolve) => out.write(msg, () => resolve()));
  const round =
    job.rank === 0
      ? async () => {
          await send();
          await take();
        }
      : async () => {
          await take();
          await send();
        };
  const result = await timed(job, round);
  await round();
  for (const s of sockets) s.end();
  return result;
}

/** Rank 1 accepts `count` connections, rank 0 dials them (in order: one at a time). */
async function rawConnect(job: Job, count: number): Promise<net.Socket[]> {
  if (job.rank === 1) {
    return new Promise((resolve, reject) => {
      const accepted: net.Socket[] = [];
      const server = net.createServer((s) => {
        accepted.push(s);
        if (accepted.length < count) return;
        server.close();
        resolve(accepted);
      });
      server.once('error', reject);
      server.listen(job.port, '127.0.0.1');
    });
  }
  const dial = () =>
    new Promise<net.Socket>((resolve) => {
      const attempt = () => {
        const s = net.connect({ host: '127.0.0.1', port: job.port }, () => resolve(s));
        s.once('error', () => setTimeout(attempt, 20));
      };
      attempt();
    });
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i++) sockets.push(await dial());
  return sockets;
}

if (process.send === undefined) {
  await main();
} else {
  const job = JSON.parse(process.argv[2] as string) as Job;
  const result = await (job.raw ? rawRank(job) : transportRank(job));
  process.send(result, () => process.exit(0));
}
