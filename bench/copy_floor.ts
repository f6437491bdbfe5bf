/**
 * The memory floor of a large 2-rank allreduce in ringreduce's data path, with none of its
 * messaging: 2 processes run at once (as two ranks do), and per iteration each does only the
 * copies and the reduction that an allreduce of `size` bytes of float32 costs it between ranks
 * of one host:
 *
 *   the caller's input copy into shared memory      size bytes
 *   reduce-scatter: its half into the lane file      size/2  (pwrite)
 *                   the peer's half out of the lane  size/2  (pread into scratch)
 *                   reduce the half                  size/2  (the engine's WebAssembly SIMD kernel)
 *   allgather:      its reduced half into the lane   size/2  (pwrite)
 *                   the peer's half out of the lane  size/2  (pread into the output)
 *
 * No waiting, no thread hand-offs, no sockets: what is left when everything but the copies is
 * free. Any transport that copies through the kernel (a socket or a tmpfs file) does at least
 * this much; only memory mapped by both processes (a native addon) could do less.
 *
 * By default each process reads back what it wrote itself, still in its own core's cache. With
 * `--cross` each reads the other's file instead, as a receiver reads what its peer wrote: the
 * lines come from the other core's cache or from memory (the two run unsynchronized, so the
 * bytes read are not the ones just written; the traffic is what counts).
 *
 *   node dist/bench/copy_floor.js [sizes in MiB, comma-separated = 4,16,64] [iterations = 30] [--cross]
 *
 * Compare with `node dist/bench/main.js --op allreduce --sizes 16M --ranks 2`.
 */
import { fork } from 'node:child_process';
import { closeSync, openSync, readSync, rmSync, truncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { selectKernel } from '../src/algorithms/reduce.js';
import { createWasmKernels } from '../src/algorithms/reduce_wasm.js';

interface Job {
  sizes: number[];
  iterations: number;
  dir: string;
  /** The files the processes write, by process; with --cross each reads the other's. */
  files: string[];
  cross: boolean;
  /** This process's index in files (set per child). */
  index?: number;
}

/** Per size: ms per iteration, p50 and mean, of one process. */
type Result = { size: number; p50: number; mean: number }[];

async function drive(): Promise<void> {
  const sizes = (process.argv[2] ?? '4,16,64').split(',').map((mib) => Number(mib) * 1024 * 1024);
  const iterations = Number(process.argv[3] ?? 30);
  const cross = process.argv.includes('--cross');
  const dir = '/dev/shm';
  const files = [0, 1].map((i) => join(dir, `ringreduce-copy-floor-${process.pid}-${i}`));
  // Full size from the start: a read of what the other has not written yet reads zeros.
  for (const file of files) {
    closeSync(openSync(file, 'w', 0o600));
    truncateSync(file, Math.max(...sizes));
  }
  const job: Job = { sizes, iterations, dir, files, cross };
  const children = [0, 1].map((index) => fork(new URL(import.meta.url), [JSON.stringify({ ...job, index })]));
  process.once('exit', () => {
    for (const file of files) rmSync(file, { force: true });
  });
  // Each size starts on both processes together: the parent answers 'ready' once both said it.
  let waiting = 0;
  const results = await Promise.all(
    children.map(
      (child) =>
        new Promise<Result>((resolve, reject) => {
          child.on('message', (m) => {
            if (m !== 'ready') return resolve(m as Result);
            if (++waiting < children.length) return;
            waiting = 0;
            for (const c of children) c.send('go');
          });
          child.once('error', reject);
          child.once('exit', (code) => code !== 0 && reject(new Error(`child exited with ${code}`)));
        }),
    ),
  );
  console.log(
    `copy floor of a 2-rank float32 allreduce (2 processes at once${cross ? ", each reading the other's file" : ''}; ms per iteration, p50 / mean):`,
  );
  for (const [i, size] of sizes.entries()) {
    const cells = results.map((r) => `${(r[i]?.p50 ?? Number.NaN).toFixed(2)} / ${(r[i]?.mean ?? Number.NaN).toFixed(2)}`);
    console.log(`  ${(size / 1024 / 1024).toString().padStart(4)} MiB: process 0 ${cells[0]}, process 1 ${cells[1]}`);
  }
}

/** Resolves when the parent says both processes are ready to start the next size. */
function together(): Promise<void> {
  return new Promise((resolve) => {
    process.once('message', () => resolve());
    process.send?.('ready');
  });
}

async function copies(job: Job): Promise<Result> {
  const index = job.index ?? 0;
  const fd = openSync(job.files[index] as string, 'r+');
  const readFd = job.cross ? openSync(job.files[1 - index] as string, 'r+') : fd;
  const kernel = (createWasmKernels() ?? selectKernel)('float32', 'sum');
  const result: Result = [];
  for (const size of job.sizes) {
    const half = size / 2;
    const input = new Float32Array(size / 4).fill(1);
    const out = new Float32Array(new SharedArrayBuffer(size));
    const scratch = new Float32Array(new SharedArrayBuffer(half));
    const bytes = new Uint8Array(out.buffer);
    const scratchBytes = new Uint8Array(scratch.buffer);
    const ms: number[] = [];
    await together();
    for (let i = 0; i < job.iterations + 3; i++) {
      const start = performance.now();
      out.set(input);
      writeAll(fd, bytes.subarray(half), 0);
      readAll(readFd, scratchBytes, 0);
      kernel(out, 0, scratch, 0, half / 4);
      writeAll(fd, bytes.subarray(0, half), half);
      readAll(readFd, bytes.subarray(half), half);
      if (i >= 3) ms.push(performance.now() - start);
    }
    ms.sort((a, b) => a - b);
    result.push({ size, p50: ms[ms.length >> 1] as number, mean: ms.reduce((a, b) => a + b, 0) / ms.length });
  }
  closeSync(fd);
  if (readFd !== fd) closeSync(readFd);
  return result;
}

function writeAll(fd: number, data: Uint8Array, position: number): void {
  for (let done = 0; done < data.byteLength; ) done += writeSync(fd, data, done, data.byteLength - done, position + done);
}

function readAll(fd: number, into: Uint8Array, position: number): void {
  for (let done = 0; done < into.byteLength; ) {
    const n = readSync(fd, into, done, into.byteLength - done, position + done);
    if (n === 0) throw new Error(`the lane file ends at ${position + done}`);
    done += n;
  }
}

if (process.send) {
  const result = await copies(JSON.parse(process.argv[2] as string) as Job);
  process.send(result, () => process.exit(0));
} else await drive();
