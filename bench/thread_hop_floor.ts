/**
 * The latency floor of ringreduce's architecture, with none of its work: 2 processes, each a
 * caller thread and an engine worker thread, the workers joined by a Unix socket (as the TCP
 * backend joins ranks of one host). One iteration is one "collective" of the smallest kind:
 * the caller posts to its worker, the worker sends 8 bytes to the peer's worker, and once it
 * has both sent and received, posts the completion back; the caller then starts the next.
 * That is the three thread wake-ups every small allreduce needs (caller → engine, engine →
 * peer engine, engine → caller), and nothing else: no negotiation, no reduction, no copies.
 *
 *   node dist/bench/thread_hop_floor.js [iterations=5000] [--caller-only] [--json <file>]
 *
 * With `--caller-only`, the floor of a design without the engine thread for such a call: each
 * process's caller thread owns the socket, writes its 8 bytes and resolves a promise once the
 * peer's 8 bytes arrived (one thread wake-up per call instead of three).
 *
 * Prints rank 0's time per iteration (mean and percentiles) and each process's CPU per
 * iteration. Compare with `npm run bench -- --op allreduce --sizes 4` (same machine, same
 * minute) and with Node's socket round trip (`node ../shared/bench/node-floor.mjs latency`).
 */
import { fork } from 'node:child_process';
import { unlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

interface Job {
  rank: number;
  path: string;
  iterations: number;
  callerOnly: boolean;
}

interface Result {
  /** µs per iteration, sorted. */
  us: number[];
  cpuUsPerIteration: number;
}

const kWarmup = 500;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.floor(p * (sorted.length - 1))] ?? Number.NaN;
}

/** The driver: starts both ranks and prints the result. */
async function drive(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { 'caller-only': { type: 'boolean', default: false }, json: { type: 'string' } },
  });
  const callerOnly = values['caller-only'] === true;
  const iterations = Number(positionals[0] ?? 5000);
  if (!Number.isInteger(iterations) || iterations < 1)
    throw new Error(`iterations must be a positive integer, got ${positionals[0]}`);
  const path = join(tmpdir(), `ringreduce-hop-floor-${process.pid}.sock`);
  const results = await Promise.all(
    [0, 1].map(
      (rank) =>
        new Promise<Result>((resolve, reject) => {
          const job: Job = { rank, path, iterations, callerOnly };
          const child = fork(new URL(import.meta.url), [JSON.stringify(job)]);
          child.once('message', (m) => resolve(m as Result));
          child.once('error', reject);
          child.once('exit', (code) => code !== 0 && reject(new Error(`rank ${rank} exited with ${code}`)));
        }),
    ),
  );
  const [r0, r1] = results as [Result, Result];
  const mean = r0.us.reduce((a, b) => a + b, 0) / r0.us.length;
  const f = (x: number) => x.toFixed(0);
  if (values.json !== undefined) {
    const floor = { mode: callerOnly ? 'caller-only' : 'engine-thread', iterations, meanUs: mean, p50Us: percentile(r0.us, 0.5) };
    writeFileSync(values.json, `${JSON.stringify(floor)}\n`);
  }
  console.log(
    (callerOnly
      ? `caller-thread floor, 2 processes x (caller thread only), Unix socket, ${iterations} iterations: `
      : `architecture floor, 2 processes x (caller + engine thread), Unix socket, ${iterations} iterations: `) +
      `mean ${f(mean)} us, p10 ${f(percentile(r0.us, 0.1))}, p50 ${f(percentile(r0.us, 0.5))}, ` +
      `p90 ${f(percentile(r0.us, 0.9))}, p99 ${f(percentile(r0.us, 0.99))}; ` +
      `CPU per iteration ${f(r0.cpuUsPerIteration)} us (rank 0), ${f(r1.cpuUsPerIteration)} us (rank 1)`,
  );
}

/** Rank 0 listens on the path, rank 1 connects (retrying until rank 0 listens). */
function connectPair(job: Job): Promise<net.Socket> {
  return new Promise<net.Socket>((resolve) => {
    if (job.rank === 0) {
      try {
        unlinkSync(job.path);
      } catch {}
      const server = net.createServer((connection) => {
        server.close();
        resolve(connection);
      });
      server.listen(job.path);
    } else {
      const attempt = () => {
        const connection = net.connect(job.path, () => resolve(connection));
        connection.once('error', () => setTimeout(attempt, 20));
      };
      attempt();
    }
  });
}

/** Sends the timings to the driver and exits. */
function report(us: number[], cpu: NodeJS.CpuUsage, iterations: number): void {
  us.sort((a, b) => a - b);
  const result: Result = { us, cpuUsPerIteration: (cpu.user + cpu.system) / iterations };
  process.send?.(result, () => process.exit(0));
}

/** One rank's caller thread doing the exchange itself: write, then await the peer's bytes. */
async function callerOnlyRank(job: Job): Promise<void> {
  const socket = await connectPair(job);
  const message = Buffer.alloc(8);
  let received = 0;
  let waiting: { count: number; resolve: () => void } | undefined;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length / message.length;
    if (waiting !== undefined && received >= waiting.count) {
      const { resolve } = waiting;
      waiting = undefined;
      resolve();
    }
  });
  const exchange = (count: number) =>
    new Promise<void>((resolve) => {
      socket.write(message);
      if (received >= count) resolve();
      else waiting = { count, resolve };
    });
  const us: number[] = [];
  let cpuStart = process.cpuUsage();
  for (let i = 1; i <= kWarmup + job.iterations; i++) {
    if (i === kWarmup + 1) cpuStart = process.cpuUsage();
    const start = performance.now();
    await exchange(i);
    if (i > kWarmup) us.push((performance.now() - start) * 1000);
  }
  const cpu = process.cpuUsage(cpuStart);
  socket.end();
  report(us, cpu, job.iterations);
}

/** One rank's caller thread: starts its engine thread and times the iterations. */
async function rank(job: Job): Promise<void> {
  const worker = new Worker(new URL(import.meta.url), { workerData: job });
  await new Promise((resolve) => worker.once('message', resolve));
  const total = kWarmup + job.iterations;
  const us: number[] = [];
  let done = 0;
  let last = 0;
  let cpuStart = process.cpuUsage();
  await new Promise<void>((resolve) => {
    worker.on('message', () => {
      const now = performance.now();
      done++;
      if (done === kWarmup) cpuStart = process.cpuUsage();
      if (done > kWarmup) us.push((now - last) * 1000);
      last = now;
      if (done === total) resolve();
      else worker.postMessage(0);
    });
    last = performance.now();
    worker.postMessage(0);
  });
  const cpu = process.cpuUsage(cpuStart);
  await worker.terminate();
  report(us, cpu, job.iterations);
}

/** One rank's engine thread: exchanges 8 bytes with the peer's per request of its caller. */
async function engine(job: Job): Promise<void> {
  const socket = await connectPair(job);
  const port = parentPort as NonNullable<typeof parentPort>;
  const message = Buffer.alloc(8);
  let requested = 0;
  let received = 0;
  let completed = 0;
  const maybeComplete = () => {
    if (completed < requested && received >= requested) {
      completed = requested;
      port.postMessage(0);
    }
  };
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length / message.length;
    maybeComplete();
  });
  port.on('message', () => {
    requested++;
    socket.write(message);
    maybeComplete();
  });
  port.postMessage('ready');
}

if (!isMainThread) await engine(workerData as Job);
else if (process.send) {
  const job = JSON.parse(process.argv[2] as string) as Job;
  await (job.callerOnly ? callerOnlyRank(job) : rank(job));
} else await drive();
