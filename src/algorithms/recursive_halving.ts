/**
 * Reduce-scatter by recursive halving (Thakur, Rabenseifner and Gropp 2005, section 4.4), with
 * per-rank block sizes, and the fold that makes it work for any N.
 *
 * How it works, for N a power of two: every rank starts with the whole range of N blocks. At the
 * step of distance d = N/2, N/4, ..., 1, rank v and its partner v XOR d split their common range
 * of 2d blocks in halves: v keeps the half that holds its own block, sends the other half to the
 * partner and reduces the half the partner sends into place. After log2 N steps rank v holds its
 * own block v reduced over every rank. Each step is pipelined in segments (exchange_step.ts): a
 * received segment is reduced out of a scratch slot while the next ones arrive.
 *
 * The fold, with p the largest power of two ≤ N and rem = N - p: ranks 2i and 2i + 1 (i < rem)
 * pair up before the halving; the even one sends its whole buffer to the odd one, which reduces it
 * in and then stands, as virtual rank i, for both blocks 2i and 2i + 1 (contiguous in rank order);
 * the other ranks are virtual ranks r - rem with their one block. The p virtual ranks run the
 * halving over their virtual blocks, and each odd rank of the pairs finally sends block 2i, fully
 * reduced, to its even partner. `average` divides each block once, on the rank that completed it.
 *
 * Cost, for even blocks: log2 p steps, each rank sending (p-1)/p·M bytes and reducing as much:
 *   log2 p·α + (p-1)/p·M·(β + γ), overlapped to max(β, γ) by the pipeline,
 * against the ring's (N-1)·α for the same bytes; the fold adds a step of M bytes (reduced) and a
 * step of one block. With very uneven blocks a step lasts as long as the largest half any rank
 * sends (cost_model.ts counts them), so the ring can win there.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { powerOfTwoBelow } from './cost_model.js';
import { type Range, StepRunner } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, type ReduceKernel, reduceDType } from './reduce.js';
import { checkReducescatterOut } from './ring_reducescatter.js';
import { type Blocks, blocksFromCounts } from './segments.js';

/** Where a rank stands in the fold: its virtual rank among the p that run the halving, if any. */
export interface Fold {
  readonly p: number;
  readonly rem: number;
  /** This rank's virtual rank, or undefined for the even rank of a pair (it sits out). */
  readonly v: number | undefined;
  /** The partner of a pair: the odd rank for an even one and back; undefined outside the pairs. */
  readonly partner: number | undefined;
}

export function foldOf(rank: number, size: number): Fold {
  const { p } = powerOfTwoBelow(size);
  const rem = size - p;
  if (rank >= 2 * rem) return { p, rem, v: rank - rem, partner: undefined };
  return rank % 2 === 0 ? { p, rem, v: undefined, partner: rank + 1 } : { p, rem, v: rank >> 1, partner: rank - 1 };
}

/** The real rank of virtual rank v: the odd one of a pair, or v + rem. */
export function realRank(fold: Fold, v: number): number {
  return v < fold.rem ? 2 * v + 1 : v + fold.rem;
}

/** Elements of virtual blocks [first, first + count), blocks back to back. */
export function blockRange(blocks: Blocks, first: number, count: number): Range {
  const offset = blocks.offsets[first] as number;
  const last = first + count - 1;
  return { offset, length: (blocks.offsets[last] as number) + (blocks.lengths[last] as number) - offset };
}

/**
 * The halving among the p virtual ranks over their p blocks: leaves virtual rank `fold.v` with
 * block v reduced over every rank that took part.
 */
export async function halve(runner: StepRunner, fold: Fold, blocks: Blocks, kernel: ReduceKernel): Promise<void> {
  const v = fold.v as number;
  let lo = 0;
  for (let d = fold.p / 2; d >= 1; d /= 2) {
    const upper = (v & d) !== 0;
    const peer = realRank(fold, v ^ d);
    const keep = blockRange(blocks, upper ? lo + d : lo, d);
    const give = blockRange(blocks, upper ? lo : lo + d, d);
    await runner.run({ to: peer, sends: [give], from: peer, recvs: [keep], kernel });
    if (upper) lo += d;
  }
}

/** Recursive doubling's allgather among the p virtual ranks, the halving in reverse: every block lands in place. */
export async function doubleGather(runner: StepRunner, fold: Fold, blocks: Blocks): Promise<void> {
  const v = fold.v as number;
  for (let d = 1; d < fold.p; d *= 2) {
    const peer = realRank(fold, v ^ d);
    const mine = v & ~(d - 1);
    const theirs = (v ^ d) & ~(d - 1);
    await runner.run({ to: peer, sends: [blockRange(blocks, mine, d)], from: peer, recvs: [blockRange(blocks, theirs, d)] });
  }
}

/**
 * Reduces block r of `buf` (counts[r] elements, blocks back to back in rank order) across all
 * ranks into rank r's block r, or into `out` when given (an array of `buf`'s dtype and counts[r]
 * elements that does not overlap `buf`). The rest of `buf` is work space. Every rank passes the
 * same counts, dtype, op, tag and options. The contract of ringReducescatter.
 *
 * @example
 *   await recursiveHalvingReducescatter(transport, gradients, [4, 4, 3], 'average', tag, { pool });
 */
export async function recursiveHalvingReducescatter(
  transport: Transport,
  buf: TypedArray,
  counts: readonly number[],
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
  out?: TypedArray,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const { rank, size } = transport;
  if (counts.length !== size) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${size}), got ${counts.length}`);
  }
  const data = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== buf.length) {
    throw new InvalidArgumentError(`buf has ${buf.length} elements but the counts add up to ${total}`);
  }
  const own = { offset: data.offsets[rank] as number, length: counts[rank] as number };
  if (out) checkReducescatterOut(buf, out, own.length);
  const resolved = resolveOptions(options);
  if (total === 0) return;
  if (size > 1) {
    const kernel = resolved.kernels(dtype, elementwiseOf(op));
    const runner = new StepRunner(transport, buf, tag, resolved, total);
    try {
      await reduceScatterBlocks(runner, foldOf(rank, size), data, kernel, finishOf(op, size));
    } finally {
      runner.release();
    }
  }
  if (out) out.set(buf.subarray(own.offset, own.offset + own.length) as never);
}

async function reduceScatterBlocks(
  runner: StepRunner,
  fold: Fold,
  data: Blocks,
  kernel: ReduceKernel,
  finish: ReturnType<typeof finishOf>,
): Promise<void> {
  const all = { offset: 0, length: blockRange(data, 0, data.offsets.length).length };
  const { partner, rem, v } = fold;
  if (v === undefined) {
    // The even rank of a pair (partner - 1): its data goes to the partner, its block comes back reduced.
    const own = blockRange(data, (partner as number) - 1, 1);
    await runner.run({ to: partner as number, sends: [all], from: partner as number, recvs: [] });
    await runner.run({ to: partner as number, sends: [], from: partner as number, recvs: [own] });
    return;
  }
  if (partner !== undefined) await runner.run({ to: partner, sends: [], from: partner, recvs: [all], kernel });
  // Virtual block v: blocks 2v and 2v + 1 for a pair, block v + rem otherwise.
  const offsets: number[] = [];
  const lengths: number[] = [];
  for (let u = 0; u < fold.p; u++) {
    const range = u < rem ? blockRange(data, 2 * u, 2) : blockRange(data, u + rem, 1);
    offsets.push(range.offset);
    lengths.push(range.length);
  }
  const virtual = { offsets, lengths };
  await halve(runner, fold, virtual, kernel);
  runner.finish(finish, [blockRange(virtual, v, 1)]);
  if (partner !== undefined) {
    await runner.run({ to: partner, sends: [blockRange(data, partner, 1)], from: partner, recvs: [] });
  }
}
