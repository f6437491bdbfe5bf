/**
 * Rabenseifner's allreduce (Thakur, Rabenseifner and Gropp 2005, section 4.5): a reduce-scatter by
 * recursive halving, then an allgather by recursive doubling. The large-message allreduce for
 * many ranks: the ring's bytes in 2·log2 N steps instead of 2(N-1).
 *
 * How it works: with p the largest power of two ≤ N, the buffer is cut into p blocks as even as
 * possible. When N is not a power of two, ranks 2i and 2i + 1 (i < N - p) fold first: the even
 * one sends its whole buffer to the odd one, which reduces it in and takes part as virtual rank i
 * (recursive_halving.ts). The p virtual ranks halve (log2 p steps, each rank keeping the half
 * that holds its block and reducing the partner's copy of it) until virtual rank v holds block v
 * reduced over every rank; `average` divides it then, once. Recursive doubling's allgather (the
 * halving's steps in reverse) brings every block to every virtual rank, in place. Finally each
 * odd rank of a pair sends the whole result to its even partner. Each block is reduced by one
 * rank and copied to the others, so every rank ends with the same bits.
 *
 * Cost, with M the buffer's bytes: 2·log2 p steps, each rank sending 2(p-1)/p·M bytes and reducing
 * (p-1)/p·M, the reductions overlapped with the transfer segment by segment:
 *   2·log2 p·α + (p-1)/p·M·(max(β, γ) + β)  (+ 2α + M·(max(β, γ) + β) for the fold),
 * against the ring's 2(N-1)·α for the same bytes. The fold doubles the bytes of the ranks that
 * fold, so for N just above a power of two the ring can be cheaper (allreduce.ts chooses).
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { StepRunner } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { blockRange, doubleGather, foldOf, halve } from './recursive_halving.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { evenBlocks } from './segments.js';

/**
 * Reduces `buf` element-wise across all ranks, in place. Every rank passes the same length,
 * dtype, op, tag and options. 'average' is for float dtypes only, 'band', 'bor' and 'bxor' for
 * integer ones only.
 *
 * @example
 *   await rabenseifnerAllreduce(transport, gradients, 'average', tag, { pool });
 */
export async function rabenseifnerAllreduce(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const resolved = resolveOptions(options);
  const { rank, size } = transport;
  if (size === 1 || buf.length === 0) return;
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  const fold = foldOf(rank, size);
  const all = { offset: 0, length: buf.length };
  const runner = new StepRunner(transport, buf, tag, resolved, buf.length);
  try {
    const { partner, v } = fold;
    if (v === undefined) {
      // The even rank of a pair: its data goes to the partner, the result comes back.
      await runner.run({ to: partner as number, sends: [all], from: partner as number, recvs: [] });
      await runner.run({ to: partner as number, sends: [], from: partner as number, recvs: [all] });
      return;
    }
    if (partner !== undefined) await runner.run({ to: partner, sends: [], from: partner, recvs: [all], kernel });
    const blocks = evenBlocks(buf.length, fold.p);
    await halve(runner, fold, blocks, kernel);
    runner.finish(finishOf(op, size), [blockRange(blocks, v, 1)]);
    await doubleGather(runner, fold, blocks);
    if (partner !== undefined) await runner.run({ to: partner, sends: [all], from: partner, recvs: [] });
  } finally {
    runner.release();
  }
}
