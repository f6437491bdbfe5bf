/**
 * What waking a peer that has slept costs: a ping-pong of 8 bytes between two processes over a
 * Unix socket, in which the pinging process computes for `busy` µs before each ping while the
 * other sleeps in the event loop waiting for it. A round trip costs the busy time plus the
 * overhead printed here; on a machine whose idle processors wake slowly (a virtual machine whose
 * halted vCPUs the host deschedules) the overhead grows with how long the peer slept, which is
 * what every small collective pays after its ranks waited for each other.
 *
 *   node dist/bench/idle_wake.js [--busy 0,30,100,300] [--iterations 3000]
 *
 * Prints, per busy time, the mean round trip and its overhead beyond the busy time, and the time
 * the pinging process spends inside its socket write (the wake-up is sent from there).
 */
import { fork } from 'node:child_process';
import { unlinkSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

interface Job {
  role: 'ping' | 'pong';
  path: string;
  busyUs: number;
  iterations: number;
}

interface Result {
  meanUs: number;
  writeUs: number;
}

const kWarmup = 300;

function spin(us: number): void {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
}

/** Resolves with each 8-byte message as it arrives. */
function messages(socket: net.Socket): () => Promise<void> {
  let received = 0;
  let waiting: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (waiting !== undefined && received >= 8) {
      received -= 8;
      const resolve = waiting;
      waiting = undefined;
      resolve();
    }
  });
  return () => {
    if (received >= 8) {
      received -= 8;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      waiting = resolve;
    });
  };
}

async function side(job: Job, socket: net.Socket): Promise<Result> {
  const next = messages(socket);
  const message = Buffer.alloc(8);
  let writeMs = 0;
  let start = 0;
  for (let i = 0; i < kWarmup + job.iterations; i++) {
    if (i === kWarmup) {
      start = performance.now();
      writeMs = 0;
    }
    if (job.role === 'pong') await next();
    else spin(job.busyUs);
    const before = performance.now();
    socket.write(message);
    writeMs += performance.now() - before;
    if (job.role === 'ping') await next();
  }
  const elapsedMs = performance.now() - start;
  socket.end();
  return { meanUs: (elapsedMs * 1000) / job.iterations, writeUs: (writeMs * 1000) / job.iterations };
}

async function child(job: Job): Promise<void> {
  const socket = await new Promise<net.Socket>((resolve) => {
    const attempt = () => {
      const connection = net.connect(job.path, () => resolve(connection));
      connection.once('error', () => setTimeout(attempt, 20));
    };
    attempt();
  });
  const result = await side(job, socket);
  process.send?.(result, () => process.exit(0));
}

async function measure(busyUs: number, iterations: number): Promise<Result> {
  const path = join(tmpdir(), `ringreduce-idle-wake-${process.pid}.sock`);
  try {
    unlinkSync(path);
  } catch {}
  const accepted = new Promise<net.Socket>((resolve) => {
    const server = net.createServer((connection) => {
      server.close();
      resolve(connection);
    });
    server.listen(path);
  });
  const pong: Job = { role: 'pong', path, busyUs, iterations };
  const peer = fork(new URL(import.meta.url), [JSON.stringify(pong)]);
  const peerDone = new Promise<void>((resolve, reject) => {
    peer.once('message', () => resolve());
    peer.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`the pong process exited with ${code}`))));
  });
  const result = await side({ role: 'ping', path, busyUs, iterations }, await accepted);
  await peerDone;
  return result;
}

async function drive(): Promise<void> {
  const { values } = parseArgs({
    options: { busy: { type: 'string', default: '0,30,100,300' }, iterations: { type: 'string', default: '3000' } },
  });
  const iterations = Number(values.iterations);
  if (!Number.isInteger(iterations) || iterations < 1)
    throw new Error(`--iterations must be a positive integer, got ${values.iterations}`);
  const busy = String(values.busy)
    .split(',')
    .map((text) => {
      const us = Number(text);
      if (!Number.isFinite(us) || us < 0) throw new Error(`--busy takes non-negative µs, got ${text}`);
      return us;
    });
  for (const busyUs of busy) {
    const { meanUs, writeUs } = await measure(busyUs, iterations);
    console.log(
      `peer slept ~${busyUs} us: round trip ${meanUs.toFixed(0)} us, ${(meanUs - busyUs).toFixed(0)} us beyond the busy time; ` +
        `${writeUs.toFixed(1)} us in the waking write`,
    );
  }
}

const job = process.argv[2];
if (job === undefined || job.startsWith('--')) await drive();
else await child(JSON.parse(job) as Job);
