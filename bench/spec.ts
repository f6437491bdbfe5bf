/**
 * What the bench driver (main.ts) hands every rank (rank.ts), and what each rank reports back.
 * Sizes follow nccl-tests: the size of a row is the bytes of the collective's whole buffer:
 * - allreduce, broadcast, reduce: the tensor;
 * - allgather, gather: the gathered output, each rank contributing size / N;
 * - reducescatter: each rank's whole input, of which each rank gets size / N;
 * - alltoall: each rank's whole send buffer (size / N to every rank, itself included), which is
 *   also the size of what it receives;
 * - scatter: the root's whole buffer, each rank getting size / N.
 * Where size / N is meant, the row's size is rounded down to N × (size / N) elements, at least N.
 */
import type { Compression, DType } from '../src/core/types.js';

export type BenchOp = 'allreduce' | 'allgather' | 'broadcast' | 'reducescatter' | 'alltoall' | 'reduce' | 'gather' | 'scatter';
/** Every op, in the order `--op all` runs them. */
export const kBenchOps: readonly BenchOp[] = [
  'allreduce',
  'allgather',
  'broadcast',
  'reducescatter',
  'alltoall',
  'reduce',
  'gather',
  'scatter',
];
/** What a bench runs without --op (the table of README.md). */
export const kDefaultBenchOps: readonly BenchOp[] = ['allreduce', 'allgather', 'broadcast'];
/** Ops that take option 'compression'. */
export const kCompressedOps: readonly BenchOp[] = ['allreduce', 'allgather', 'reducescatter'];
/** Ops whose row size is split into N equal parts, one per rank. */
export const kSplitOps: readonly BenchOp[] = ['allgather', 'reducescatter', 'alltoall', 'gather', 'scatter'];

export interface BenchSpec {
  ops: BenchOp[];
  sizes: number[];
  dtype: DType;
  /** Timed iterations per size; 0 picks them from the size (autoIterations). */
  iterations: number;
  /** Untimed iterations per size before the timed ones; undefined picks them from the size (autoWarmup). */
  warmup?: number;
  check: boolean;
  /**
   * Fresh output memory per call (the API default) instead of a reused `out` buffer. Alltoall and
   * scatter have no `out`: they always get fresh output.
   */
  fresh: boolean;
  /**
   * Allreduce, broadcast and reduce in place: the tensor is its own `out` (shared memory, no input
   * copy, as torch.distributed and Gloo work; reduce: on the root). Timed over zeros, so that the
   * values stay put; the check runs one more call on real values. The other ops ignore it.
   */
  inPlace: boolean;
  /** Use the blocking ...Sync calls (shows the hand-off to the engine thread). */
  sync: boolean;
  /** Allreduce only: submit this many named tensors of the row's size together per iteration (fusion). */
  tensors: number;
  /** With tensors > 1: submit them as one groupedAllreduce instead of separate named calls. */
  grouped?: boolean;
  /**
   * After the ops: a training step of kStepTensors named float32 gradients of kStepTensorBytes
   * each, submitted together (fused), one allreduce of all their bytes, and the same gradients as
   * one groupedAllreduce, one after the other.
   */
  step: boolean;
  /** Option 'compression' of allreduce, allgather and reducescatter ('fp16': float32 sent as halves). */
  compression: Compression;
  /** Run every collective in a process set of the first setRanks ranks; 0: the whole job. */
  setRanks: number;
  /** Where rank r writes its BenchReport: `${outDir}/rank.${r}.json`. */
  outDir: string;
}

export interface BenchRow {
  op: BenchOp;
  bytes: number;
  count: number;
  iterations: number;
  /** Mean time per call on this rank, microseconds. */
  timeUs: number;
  /** The median of the iterations' times (µs): steadier than the mean on a shared machine. */
  medianUs: number;
  /** Untimed iterations before the timed ones, and their mean time per call (µs): what a cold start costs. */
  warmup?: number;
  warmupUs?: number;
  /**
   * CPU time this rank's process (all its threads: caller, engine, V8's) used per timed call, µs:
   * what bounds the time once the ranks' threads outnumber the free cores.
   */
  cpuUs: number;
  /** Result check on the last iteration: true, false, or null when disabled. */
  ok: boolean | null;
  /** Peak resident set size of this rank's process so far, bytes. */
  maxRssBytes: number;
  /** Control messages and bytes this rank sent per timed call (rr.stats(): ready rounds, rank 0's decisions). */
  controlMessages?: number;
  controlBytes?: number;
}

export interface BenchReport {
  rank: number;
  /** The ranks the collectives ran on: the job's size, or the process set's. */
  size: number;
  /** False for a rank outside the measured process set: it has no rows (unset: a member). */
  member?: boolean;
  rows: BenchRow[];
  /** With BenchSpec.step: the fused step's row, the single allreduce's, then the grouped step's. */
  step?: BenchRow[];
  /** CPU time this rank's process used while idle for one second, starting 2 s after the runs. */
  idleCpuMs: number;
}

/** The training step case (BenchSpec.step): 100 gradients of 4 KiB, as many small layers' are. */
export const kStepTensors = 100;
export const kStepTensorBytes = 4096;

/**
 * Timed iterations for `tensors` buffers of `bytes` each when the user gave none: about 1 GiB of
 * data, at most 1000 iterations and 20,000 calls, at least 3 (the peers' schedule,
 * bench/peers/mpi_coll_bench.c, counted so that every rank computes the same number).
 */
export function autoIterations(bytes: number, tensors = 1): number {
  const calls = Math.floor(20_000 / tensors);
  return Math.max(3, Math.min(1000, calls, Math.round(2 ** 30 / Math.max(bytes * tensors, 1))));
}

/**
 * Untimed iterations before the timed ones when the user gave none: up to 10,000 calls (V8
 * optimizes a function after a few thousand calls, and until then a small call costs several
 * times its steady-state time: docs/performance.md, "Method"), and for a step of several tensors
 * up to 2000 steps (the fusion's code runs once per step); at most about 4 GiB of data, at least 2.
 */
export function autoWarmup(bytes: number, tensors = 1): number {
  const iterations = tensors > 1 ? 2000 : 10_000;
  return Math.max(2, Math.min(iterations, Math.round(2 ** 32 / Math.max(bytes * tensors, 1))));
}
