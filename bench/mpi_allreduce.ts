/**
 * Allreduce through ringreduce's MPI backend next to a plain C MPI_Allreduce
 * (bench/peers/mpi_coll_bench.c), side by side in the same run, 2 ranks, float32 sum.
 *
 *   node dist/bench/mpi_allreduce.js [--sizes 1M,4M,16M,64M] [--reps 3] [--np 2] [--c-source PATH]
 *
 * Each repetition runs, one after the other, under `mpirun --bind-to none`:
 *   c          the C program (MPI_Allreduce, out of place, buffers reused);
 *   api        ringreduce's public API, one call at a time, `allreduce(buf, { out: buf })`: the
 *              caller's thread, the engine worker, negotiation through rank 0, MPI_Allreduce
 *              on the progress thread, and back;
 *   batch      the same with 8 tensors of that size in flight at once (as a training step
 *              submits its gradients): negotiation overlaps execution, and tensors that arrive
 *              together are fused into one MPI_Allreduce. Time per tensor;
 *   transport  MpiTransport's native allreduce straight from one thread (no engine): the
 *              backend's own cost.
 * Every mode uses the C program's schedule (iterations = clamp(1 GiB / bytes, 5, 1000), capped
 * to ~0.5 s per size from a probe; warm-up = clamp(iterations / 10, 2, 100); ringreduce's modes
 * warm up for up to 4000 calls or 2 s instead, until V8 has optimized the path, and size the
 * schedule from the warm calls), and its latency:
 * the mean over ranks of each rank's mean time per call. ringreduce's modes reduce in place
 * (the C program reduces out of place, without an extra pass) over zeros, so the values stay
 * put; a last call with real values checks the result. Like the C program, every mode touches
 * its buffers before the probe, so no timing includes first-touch page faults. The table shows medians over the
 * repetitions and the ratio to C; the machine is shared, so ratios mean more than times.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { idlePercent, machineLine } from './machine.js';

const kRoot = fileURLToPath(new URL('../../', import.meta.url));
const kTimeBudgetS = 0.5;
/** ringreduce's modes warm up for up to this many calls or this long (see the rank's loop). */
const kJsWarmupCalls = 4000;
const kJsWarmupBudgetS = 2;
const kResultPrefix = 'MPI-BENCH ';

type Mode = 'c' | 'api' | 'batch' | 'transport';
const kModes: readonly Mode[] = ['c', 'api', 'batch', 'transport'];
const kBatch = 8;

function parseSize(text: string): number {
  const match = /^(\d+)([KMG]?)$/i.exec(text.trim());
  if (!match) throw new Error(`bad size ${text}`);
  const unit = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[(match[2] as string).toUpperCase()] as number;
  return Number(match[1]) * unit;
}

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : fallback;
}

/** The C program's iteration schedule for one size, from the probe estimate (seconds per call). */
export function schedule(bytes: number, estimateS: number): { iters: number; warmup: number } {
  let iters = Math.min(1000, Math.max(5, Math.floor(2 ** 30 / bytes)));
  if (estimateS > 0 && iters * estimateS > kTimeBudgetS) iters = Math.max(5, Math.floor(kTimeBudgetS / estimateS) + 1);
  return { iters, warmup: Math.min(100, Math.max(2, Math.floor(iters / 10))) };
}

function val(rank: number, i: number): number {
  return (rank + 1) * ((i % 16) + 1);
}

// ---------------------------------------------------------------- one rank (under mpirun)

interface Collective {
  /** Reduces `bufs` (one call, or several in flight at once) in place. */
  allreduce(bufs: readonly Float32Array[]): Promise<void>;
  /** Rank 0's value on every rank. */
  shareFromRoot(value: number): Promise<number>;
  /** Every rank's value, on every rank. */
  gather(value: number): Promise<number[]>;
  close(): Promise<void>;
  rank: number;
  size: number;
}

async function apiCollective(): Promise<Collective> {
  const rr = await import('../src/index.js');
  await rr.init({ backend: 'mpi' });
  return {
    rank: rr.rank(),
    size: rr.size(),
    allreduce: async (bufs) => {
      await Promise.all(bufs.map((buf, i) => rr.allreduce(buf, { name: `bench/${i}`, out: buf })));
    },
    shareFromRoot: async (value) => (await rr.broadcast(new Float64Array([value]), { name: 'estimate' }))[0] as number,
    gather: async (value) => [...(await rr.allgather(new Float64Array([value]), { name: 'times' }))],
    close: () => rr.shutdown(),
  };
}

async function transportCollective(): Promise<Collective> {
  const { resolveConfig } = await import('../src/core/config.js');
  const { createMpiTransport } = await import('../src/transport/mpi/index.js');
  const handle = await createMpiTransport(resolveConfig({ backend: 'mpi' }));
  const { native, rank, size } = handle.transport;
  return {
    rank,
    size,
    allreduce: async (bufs) => {
      for (const buf of bufs) await native.allreduce(buf, 'sum');
    },
    shareFromRoot: async (value) => {
      const buf = new Float64Array([value]);
      await native.broadcast(buf, 0);
      return buf[0] as number;
    },
    gather: async (value) => {
      const out = new Float64Array(size);
      out[rank] = value;
      await native.allgather(out, new Array(size).fill(1));
      return [...out];
    },
    close: () => handle.close(),
  };
}

/**
 * JavaScript runs at its steady speed only once V8 has optimized it, after a few thousand calls,
 * and a cold call costs several times a warm one, so the warm-up is not sized from a cold probe:
 * it runs in chunks of at most 100 calls (64 MiB each at most) until kJsWarmupCalls tensors or
 * kJsWarmupBudgetS seconds, as rank 0 decides after each chunk (every rank must make the same
 * calls). Returns the last chunk's seconds per tensor: the estimate the schedule is sized from,
 * warm as the C program's probe is.
 */
async function warmUp(c: Collective, bufs: readonly Float32Array[]): Promise<number> {
  const bytesPerCall = bufs.reduce((sum, buf) => sum + buf.byteLength, 0);
  const chunk = Math.max(1, Math.min(100, Math.floor(2 ** 26 / bytesPerCall)));
  const started = performance.now();
  for (let tensors = 0; ; ) {
    const t = performance.now();
    for (let i = 0; i < chunk; i++, tensors += bufs.length) await c.allreduce(bufs);
    const estimate = (performance.now() - t) / 1000 / (chunk * bufs.length);
    const more = tensors < kJsWarmupCalls && performance.now() - started < kJsWarmupBudgetS * 1000;
    if ((await c.shareFromRoot(more ? 1 : 0)) === 0) return estimate;
  }
}

async function rankMain(mode: Mode, sizes: number[]): Promise<void> {
  const c = mode === 'transport' ? await transportCollective() : await apiCollective();
  const perCall = mode === 'batch' ? kBatch : 1;
  const rows: { bytes: number; iters: number; avgUs: number; ok: boolean }[] = [];
  for (const bytes of sizes) {
    const count = bytes / 4;
    const bufs = Array.from({ length: perCall }, () => new Float32Array(new SharedArrayBuffer(bytes)));
    // Touch every page before any timing, as the C program does: otherwise the probe times
    // first-touch page faults, and the schedule it picks has far fewer iterations than C's.
    for (const buf of bufs) buf.fill(0);
    const estimate = await warmUp(c, bufs);
    const shared = await c.shareFromRoot(estimate);
    const { iters } = schedule(bytes, shared);
    const calls = Math.max(1, Math.ceil(iters / perCall));
    await c.gather(0); // a barrier
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) await c.allreduce(bufs);
    const mean = ((performance.now() - t0) * 1000) / (calls * perCall);
    const means = await c.gather(mean);
    // The check: real values, summed once.
    for (const buf of bufs) for (let i = 0; i < count; i++) buf[i] = val(c.rank, i);
    await c.allreduce(bufs);
    const f = (c.size * (c.size + 1)) / 2;
    const ok = bufs.every((buf) => buf.every((v, i) => v === f * ((i % 16) + 1)));
    rows.push({ bytes, iters: calls * perCall, avgUs: means.reduce((a, b) => a + b, 0) / means.length, ok });
  }
  if (c.rank === 0) console.log(`${kResultPrefix}${JSON.stringify(rows)}`);
  await c.close();
}

// ---------------------------------------------------------------- the driver

function mpirun(np: number, command: string[], env: NodeJS.ProcessEnv = {}): string {
  const args = ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '-np', String(np), ...command];
  const run = spawnSync('mpirun', args, { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 600_000 });
  if (run.status !== 0)
    throw new Error(`mpirun ${command.join(' ')} failed (${run.status ?? run.signal}):\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

function runMode(mode: Mode, np: number, sizes: number[], cBinary: string): Map<number, number> {
  const times = new Map<number, number>();
  if (mode === 'c') {
    const out = mpirun(np, [cBinary, 'allreduce', ...sizes.map(String)]);
    for (const line of out.split('\n')) {
      const fields = line.split('\t');
      if (fields[0] !== 'allreduce') continue;
      if (fields[10] !== 'ok') throw new Error(`the C program's result check failed: ${line}`);
      times.set(Number(fields[2]), Number(fields[5]));
    }
    return times;
  }
  const script = fileURLToPath(import.meta.url);
  const out = mpirun(np, [process.execPath, script, '--rank', mode, '--sizes', sizes.join(',')], {
    RINGREDUCE_LOG_LEVEL: 'error',
  });
  const line = out.split('\n').find((l) => l.startsWith(kResultPrefix));
  if (!line) throw new Error(`no result from mode ${mode}:\n${out}`);
  for (const row of JSON.parse(line.slice(kResultPrefix.length)) as { bytes: number; avgUs: number; ok: boolean }[]) {
    if (!row.ok) throw new Error(`ringreduce (${mode}) computed a wrong result at ${row.bytes} bytes`);
    times.set(row.bytes, row.avgUs);
  }
  return times;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function human(bytes: number): string {
  return bytes >= 1024 ** 2 ? `${bytes / 1024 ** 2} MiB` : bytes >= 1024 ? `${bytes / 1024} KiB` : `${bytes} B`;
}

/** Waits (up to a minute) for the machine to be mostly idle; returns the idle percent seen last. */
async function waitForIdle(): Promise<number | null> {
  let idle: number | null = null;
  for (const deadline = performance.now() + 60_000; performance.now() < deadline; ) {
    idle = await idlePercent(1000);
    if (idle === null || idle >= 85) break;
  }
  return idle;
}

async function driverMain(): Promise<void> {
  const sizes = option('sizes', '1M,4M,16M,64M').split(',').map(parseSize);
  const reps = Number(option('reps', '3'));
  const np = Number(option('np', '2'));
  const source = option('c-source', join(kRoot, 'bench', 'peers', 'mpi_coll_bench.c'));
  if (!existsSync(source)) throw new Error(`the C benchmark ${source} is missing (pass --c-source PATH)`);
  const cBinary = join(mkdtempSync(join(tmpdir(), 'ringreduce-mpi-bench-')), 'mpi_coll_bench');
  execFileSync('mpicc', ['-O2', '-o', cBinary, source]);
  const idle = await idlePercent();
  console.log(`# ${machineLine(idle)}`);
  console.log(`# ${np} ranks, float32 sum, ${reps} repetitions (median), mpirun --bind-to none`);
  const samples = new Map<Mode, Map<number, number[]>>(kModes.map((m) => [m, new Map(sizes.map((s) => [s, []]))]));
  for (let rep = 0; rep < reps; rep++) {
    console.log(`# repetition ${rep + 1}: CPU idle before ${await waitForIdle()}%`);
    for (const mode of kModes) {
      for (const [bytes, us] of runMode(mode, np, sizes, cBinary)) samples.get(mode)?.get(bytes)?.push(us);
    }
  }
  const med = (mode: Mode, bytes: number) => median(samples.get(mode)?.get(bytes) ?? []);
  console.log('\n| size | C MPI_Allreduce | API, 1 at a time | / C | API, 8 in flight | / C | MpiTransport | / C |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
  const us = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(2)} ms` : `${v.toFixed(0)} µs`);
  for (const bytes of sizes) {
    const c = med('c', bytes);
    const cells = (['api', 'batch', 'transport'] as const).map((m) => `${us(med(m, bytes))} | ${(med(m, bytes) / c).toFixed(2)}`);
    console.log(`| ${human(bytes)} | ${us(c)} | ${cells.join(' | ')} |`);
  }
}

const rankIndex = process.argv.indexOf('--rank');
if (rankIndex >= 0) {
  await rankMain(process.argv[rankIndex + 1] as Mode, option('sizes', '').split(',').map(Number));
} else {
  await driverMain();
}
