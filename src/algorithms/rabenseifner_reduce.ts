/**
 * Rabenseifner's reduce (Thakur, Rabenseifner and Gropp 2005, section 4.6): a reduce-scatter by
 * recursive halving, then a binomial gather of the reduced blocks to the root. The large-message
 * reduce for many ranks: the root takes in (p-1)/p·M bytes twice instead of the tree's
 * ⌈log2 N⌉·M.
 *
 * How it works: with p the largest power of two ≤ N, the buffer is cut into p blocks as even as
 * possible; ranks fold in pairs when N is not a power of two, and the p virtual ranks halve until
 * virtual rank v holds block v reduced over every rank (recursive_halving.ts; `average` divides
 * it there). The gather runs toward the root's virtual rank r (the root itself, or the odd
 * partner of an even root that folded), with u = v XOR r: at the step of distance d = 1, 2, 4, ...,
 * a rank whose u has bit d set sends the d blocks it holds (its aligned group of d) to v XOR d and
 * is done; the others receive the partner's d blocks into place. After log2 p steps virtual rank
 * r holds every block; an even root that folded then gets the whole buffer from its partner.
 * The halving's pairs and the gather's are fixed by N and the root, so the root gets the same
 * bits on every run, whatever the timing.
 *
 * Cost, with M the buffer's bytes:
 *   2·log2 p·α + (p-1)/p·M·(max(β, γ) + β)  (+ α + M·max(β, γ) for the fold, + α + M·β when the
 *   root is the even rank of a pair),
 * against the tree's ⌈log2 N⌉·(α + M·β) (reduce_to_root.ts chooses).
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { StepRunner } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { blockRange, foldOf, halve, realRank } from './recursive_halving.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { evenBlocks } from './segments.js';

/**
 * Reduces `buf` element-wise across all ranks into the root's `buf`. `buf` is work space on every
 * other rank. Every rank passes the same length, dtype, op, root, tag and options (the contract
 * of treeReduce).
 *
 * @example
 *   await rabenseifnerReduce(transport, gradients, 'sum', 0, tag, { pool });
 */
export async function rabenseifnerReduce(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  if (!Number.isSafeInteger(root) || root < 0 || root >= size) {
    throw new InvalidArgumentError(`root must be a rank in [0, ${size}), got ${root}`);
  }
  const dtype = reduceDType(buf, op);
  const resolved = resolveOptions(options);
  if (size === 1 || buf.length === 0) return;
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  const fold = foldOf(rank, size);
  const rootFold = foldOf(root, size);
  // The virtual rank that gathers: the root's, or its odd partner's when the root sits out.
  const gatherer = rootFold.v ?? (rootFold.partner as number) >> 1;
  const all = { offset: 0, length: buf.length };
  const runner = new StepRunner(transport, buf, tag, resolved, buf.length);
  try {
    const { partner, v } = fold;
    if (v === undefined) {
      await runner.run({ to: partner as number, sends: [all], from: partner as number, recvs: [] });
      if (rank === root) await runner.run({ to: partner as number, sends: [], from: partner as number, recvs: [all] });
      return;
    }
    if (partner !== undefined) await runner.run({ to: partner, sends: [], from: partner, recvs: [all], kernel });
    const blocks = evenBlocks(buf.length, fold.p);
    await halve(runner, fold, blocks, kernel);
    runner.finish(finishOf(op, size), [blockRange(blocks, v, 1)]);
    const u = v ^ gatherer;
    for (let d = 1; d < fold.p; d *= 2) {
      const peer = realRank(fold, v ^ d);
      const mine = blockRange(blocks, v & ~(d - 1), d);
      if (u & d) {
        await runner.run({ to: peer, sends: [mine], from: peer, recvs: [] });
        return;
      }
      await runner.run({ to: peer, sends: [], from: peer, recvs: [blockRange(blocks, (v ^ d) & ~(d - 1), d)] });
    }
    // This is the gathering virtual rank: hand the result to an even root that folded.
    if (rank !== root) await runner.run({ to: root, sends: [all], from: root, recvs: [] });
  } finally {
    runner.release();
  }
}
