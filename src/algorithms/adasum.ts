/**
 * Adasum allreduce (Maleki et al., "Scaling Distributed Training with Adaptive Summation", 2021;
 * Horovod's `op=hvd.Adasum`): the ranks' vectors combined pairwise, a pair (a, b) becoming
 *   a' = (1 - a·b / (2|a|²)) a + (1 - a·b / (2|b|²)) b,
 * which is a + b for orthogonal vectors and their average for equal ones. The pairs form a
 * binary tree over the ranks: at level d = 1, 2, 4, ..., N/2 the combined vector of ranks
 * [g, g + d) meets that of [g + d, g + 2d). A vector of norm² below sqrt(DBL_MIN) (zero, in
 * practice) keeps its partner's coefficient at 1, so a zero vector is the identity (no NaN).
 *
 * How it works (vector halving, distance doubling, as Horovod's adasum.h): every rank starts with
 * its whole vector. At level d, rank r and its partner r XOR d hold the same range (their
 * combined vectors' pieces); they split it in halves, the lower rank of the pair keeping the
 * first, and swap the halves they give away. Each then holds, for its half, a piece of both
 * vectors of the pair. The dot product and both squared norms are partial sums over that piece,
 * computed in float64; the 2d ranks of the group hold the pieces that tile the whole range, so
 * they sum their partials by recursive doubling among themselves (3 float64 per tensor) and every
 * one of them applies the same coefficients to its piece. After log2 N levels each rank holds
 * 1/N of the result; the levels run back (recursive doubling's allgather) to give every rank
 * all of it. The additions of the partial sums are pairwise and commutative, so every rank of a
 * group computes the same coefficients bit for bit.
 *
 * Several tensors packed back to back (`counts`, fusion) are combined each on its own: the
 * partial sums are kept per tensor and each tensor's piece gets its own coefficients.
 *
 * Only power-of-two rank counts: the tree pairs every rank at every level (Horovod refuses
 * other counts too).
 *
 * Cost, for M bytes and T tensors: log2 N halving steps sending (N-1)/N·M bytes in all, the same
 * back in the gather, and at level k (1..log2 N) k exchanges of 24·T bytes for the partial sums:
 *   (2 log2 N + log2 N (log2 N + 1) / 2)·α + 2 (N-1)/N·M·β + (N-1)/N·M·γ'
 * where γ' is the cost per byte of the dot products and the scaled add (about three passes over
 * each piece): Rabenseifner's bytes, with more, tiny, latency-bound steps.
 */
import { dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import { isPowerOfTwo } from '../core/shapes.js';
import type { TypedArray, WireDType } from '../core/types.js';
import { bytesOf, type Transport } from '../transport/transport.js';
import { type AdasumKernels, adasumKernelsFor } from './adasum_kernels.js';
import type { Range } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';

/** Below this squared norm a vector counts as zero (Horovod's threshold: the square root of the smallest normal double). */
export const kAdasumTinyNormSq = Math.sqrt(2.2250738585072014e-308);

/** The dtypes Adasum combines: floats (float16 is fp16 compression's wire form, computed in float64 and float32). */
export const kAdasumDTypes: readonly WireDType[] = ['float32', 'float64', 'float16'];

/**
 * Combines every rank's `buf` by Adasum, in place: every rank ends with the same result. `counts`
 * (default: one tensor, the whole buffer) are the lengths of tensors packed back to back, each
 * combined on its own. Every rank passes the same length, counts, dtype and tag; the number of
 * ranks must be a power of two.
 *
 * @example
 *   await adasumAllreduce(transport, gradients, tag, { pool });
 */
export async function adasumAllreduce(
  transport: Transport,
  buf: TypedArray,
  tag: number,
  options?: AlgorithmOptions,
  counts: readonly number[] = [buf.length],
): Promise<void> {
  const dtype = dtypeOf(buf);
  if (dtype === undefined || !kAdasumDTypes.includes(dtype)) {
    throw new InvalidArgumentError(`adasum needs a float32, float64 or float16 buffer, got ${dtype ?? 'another kind'}`);
  }
  const { rank, size } = transport;
  if (!isPowerOfTwo(size)) {
    throw new InvalidArgumentError(`adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...), got ${size}`);
  }
  const total = counts.reduce((a, b) => a + b, 0);
  if (!counts.every((c) => Number.isSafeInteger(c) && c >= 0) || total !== buf.length) {
    throw new InvalidArgumentError(
      `counts must be non-negative integers adding up to buf's ${buf.length} elements, got [${counts}]`,
    );
  }
  if (size === 1 || buf.length === 0) return;
  const { pool } = resolveOptions(options);
  // The largest piece a rank receives is the first level's half.
  const scratchBytes = Math.ceil(buf.length / 2) * buf.BYTES_PER_ELEMENT;
  const scratchBuffer = pool?.acquire(scratchBytes) ?? new ArrayBuffer(scratchBytes);
  try {
    const scratch = new (buf.constructor as new (b: ArrayBuffer, o: number, n: number) => TypedArray)(
      scratchBuffer,
      0,
      Math.ceil(buf.length / 2),
    );
    const run: Run = { transport, tag, buf, scratch, counts, kernels: adasumKernelsFor(dtype) };
    const held = await halve(run, rank, size);
    await gather(run, rank, size, held);
  } finally {
    // Every send and recv was awaited: nothing writes into the scratch any more.
    pool?.release(scratchBuffer);
  }
}

interface Run {
  readonly transport: Transport;
  readonly tag: number;
  readonly buf: TypedArray;
  readonly scratch: TypedArray;
  readonly counts: readonly number[];
  readonly kernels: AdasumKernels;
}

/** The halving levels: returns the ranges this rank held before each level (the last one: its share). */
async function halve(run: Run, rank: number, size: number): Promise<Range[]> {
  const { buf, scratch, counts, kernels } = run;
  const held: Range[] = [];
  let range: Range = { offset: 0, length: buf.length };
  for (let d = 1; d < size; d *= 2) {
    const lower = (rank & d) === 0;
    const half = Math.floor(range.length / 2);
    const first = { offset: range.offset, length: half };
    const second = { offset: range.offset + half, length: range.length - half };
    const keep = lower ? first : second;
    const give = lower ? second : first;
    await exchange(run, rank ^ d, view(buf, give), view(scratch, { offset: 0, length: keep.length }));
    // Per tensor: [a·b, |lower's|², |upper's|²] over this rank's piece, then over the group's.
    const sums = new Float64Array(3 * counts.length);
    forEachPiece(counts, keep, (t, offset, length) => {
      kernels.dotAndNorms(buf, offset, scratch, offset - keep.offset, length, sums, 3 * t, lower);
    });
    await groupSum(run, rank, d, sums);
    forEachPiece(counts, keep, (t, offset, length) => {
      const dot = sums[3 * t] as number;
      const own = sums[3 * t + (lower ? 1 : 2)] as number;
      const other = sums[3 * t + (lower ? 2 : 1)] as number;
      kernels.scaledAdd(buf, offset, coefficient(dot, own), scratch, offset - keep.offset, coefficient(dot, other), length);
    });
    held.push(range);
    range = keep;
  }
  held.push(range);
  return held;
}

/** The halving in reverse: partners swap their shares until every rank holds the whole result. */
async function gather(run: Run, rank: number, size: number, held: Range[]): Promise<void> {
  let mine = held.pop() as Range;
  for (let d = size / 2; d >= 1; d /= 2) {
    const parent = held.pop() as Range;
    const theirs =
      mine.offset === parent.offset
        ? { offset: parent.offset + mine.length, length: parent.length - mine.length }
        : { offset: parent.offset, length: parent.length - mine.length };
    await exchange(run, rank ^ d, view(run.buf, mine), view(run.buf, theirs));
    mine = parent;
  }
}

/** Sums `sums` over the 2d ranks of this rank's group (its ranks agree on every bit above d). */
async function groupSum(run: Run, rank: number, d: number, sums: Float64Array): Promise<void> {
  const incoming = new Float64Array(sums.length);
  for (let j = 1; j <= d; j *= 2) {
    await exchange(run, rank ^ j, bytesOf(sums), bytesOf(incoming));
    for (let i = 0; i < sums.length; i++) sums[i] = (sums[i] as number) + (incoming[i] as number);
  }
}

/** A vector's coefficient in a pair: 1 - a·b / (2|v|²), or 1 for a (near) zero vector. */
function coefficient(dot: number, normSq: number): number {
  return normSq >= kAdasumTinyNormSq ? 1 - dot / (2 * normSq) : 1;
}

/** Calls `each(tensor, offset, length)` for every tensor's part inside `range` (offsets into the buffer). */
function forEachPiece(
  counts: readonly number[],
  range: Range,
  each: (tensor: number, offset: number, length: number) => void,
): void {
  const end = range.offset + range.length;
  let start = 0;
  for (let t = 0; t < counts.length && start < end; t++) {
    const stop = start + (counts[t] as number);
    const from = Math.max(start, range.offset);
    const to = Math.min(stop, end);
    if (to > from) each(t, from, to - from);
    start = stop;
  }
}

function view(array: TypedArray, range: Range): Uint8Array {
  const bytes = array.BYTES_PER_ELEMENT;
  return new Uint8Array(array.buffer, array.byteOffset + range.offset * bytes, range.length * bytes);
}

async function exchange(run: Run, peer: number, send: Uint8Array, into: Uint8Array): Promise<void> {
  const sent = run.transport.send(peer, run.tag, send);
  const received = run.transport.recv(peer, run.tag, into);
  // Settle both before returning, even on failure: the caller reuses both buffers.
  const [s, r] = await Promise.allSettled([sent, received]);
  if (s.status === 'rejected') throw s.reason;
  if (r.status === 'rejected') throw r.reason;
}
