/**
 * TCP transport throughput: 2 ranks, each in its own worker thread (as the engine runs them),
 * over 127.0.0.1. Rank 0 sends `iterations` messages of `mib` MiB to rank 1, which receives into
 * SharedArrayBuffer memory. Prints the payload rate seen by the receiver.
 *
 *   node dist/bench/tcp_transport_throughput.js [mib=64] [iterations=20] [mode=oneway|both]
 *
 * "both" sends the same volume in each direction at once (what a ring step does).
 */
import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { connectLoopbackPair, freeStorePort } from './loopback_pair.js';

interface Job {
  rank: number;
  port: number;
  mib: number;
  iterations: number;
  both: boolean;
}

const kWarmup = 3;

async function main(): Promise<void> {
  const mib = Number(process.argv[2] ?? 64);
  const iterations = Number(process.argv[3] ?? 20);
  const both = process.argv[4] === 'both';
  const port = await freeStorePort();
  const results = await Promise.all(
    [0, 1].map(
      (rank) =>
        new Promise<number>((resolve, reject) => {
          const worker = new Worker(new URL(import.meta.url), {
            workerData: { rank, port, mib, iterations, both } satisfies Job,
          });
          worker.once('message', resolve);
          worker.once('error', reject);
        }),
    ),
  );
  const seconds = Math.max(...results) / 1000;
  const bytes = mib * 1024 * 1024 * iterations * (both ? 2 : 1);
  console.log(
    `tcp transport, 2 ranks (worker threads), ${iterations} x ${mib} MiB ${both ? 'each way at once' : 'one way'}: ` +
      `${(bytes / seconds / 1e9).toFixed(2)} GB/s (${(seconds * 1000).toFixed(0)} ms)`,
  );
}

async function rank(job: Job): Promise<number> {
  const { transport, close } = await connectLoopbackPair(job.rank, job.port, 'bench');
  const bytes = job.mib * 1024 * 1024;
  const out = new Uint8Array(new SharedArrayBuffer(bytes)).fill(job.rank + 1);
  const into = new Uint8Array(new SharedArrayBuffer(bytes)).fill(0);
  const peer = 1 - job.rank;
  const step = async (tag: number) => {
    const ops: Promise<void>[] = [];
    if (job.rank === 0 || job.both) ops.push(transport.send(peer, tag, out));
    if (job.rank === 1 || job.both) ops.push(transport.recv(peer, tag, into));
    await Promise.all(ops);
  };
  for (let i = 0; i < kWarmup; i++) await step(i);
  const start = performance.now();
  for (let i = 0; i < job.iterations; i++) await step(kWarmup + i);
  const elapsed = performance.now() - start;
  if (into[bytes - 1] !== (job.rank === 1 || job.both ? peer + 1 : 0)) throw new Error('payload check failed');
  // A last round trip so neither rank closes while the other still reads.
  await step(kWarmup + job.iterations);
  await close();
  return elapsed;
}

if (isMainThread) {
  await main();
} else {
  parentPort?.postMessage(await rank(workerData as Job));
}
