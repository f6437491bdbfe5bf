/**
 * Binomial-tree scatter with per-rank block sizes (scatterv): the mirror of tree_gather.ts.
 *
 * How it works, with v = (rank - root) mod N: the root's blocks, read in relative-rank order
 * (rank order rotated by the root), give every subtree a contiguous range [v, v + 2^j).
 * The root sends each child its subtree's range, the farthest (largest) child v + 2^(j-1) first,
 * then v + 2^(j-2), ..., v + 1 last; a child keeps its own block and forwards the rest the same
 * way. Farthest first puts the largest subtree to work at once, while the root still streams the
 * smaller ones: the root's port is busy from start to end and the subtrees finish under it.
 * Farthest first at every level means a node consumes its range from the top down, so every
 * stream runs in descending position: pieces are cut on the global grid of tree_gather.ts, each
 * node receives its range top piece first and forwards a piece as soon as it has arrived, so the
 * send stream follows the receive stream and a large scatter flows down the tree as a pipeline.
 * The deadlock argument is gather's with positions counted from the top and levels from the
 * root: every dependency (forwarding, the windows, a parent's order of children) points at a
 * higher piece or one of an upper level.
 *
 * Why a tree and not N - 1 direct sends from the root: both have the root send the same
 * sum(counts) - counts[root] elements, which bounds a large scatter either way (pipelining hides
 * the extra hops of the tree); but the tree's root starts ceil(log2 N) messages instead of N - 1,
 * and the per-message cost is what dominates the small blocks a scatter usually carries.
 *
 * Cost: ceil(log2 N) rounds. The root sends sum(counts) - counts[root] elements; a non-root
 * receives its subtree's elements once and forwards all but its own block, so a block crosses as
 * many links as its rank is deep in the tree (at most log2 N). With even blocks of M/N bytes,
 * ⌈log2 N⌉·α + (N-1)/N·M·β: the root's stream, the subtrees' forwarding hidden beneath it (nearest
 * first would leave the half of the data bound for v + 2^(j-1) to be forwarded after the root
 * is done: up to 1.7 times that). Intermediate nodes hold their subtree in scratch; leaves
 * receive straight into `output`.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { runPipeline } from './pipeline.js';
import { checkSameDType, checkTreeArguments, RangePlan, rangeStore, TreeLayout, withScratch } from './tree_gather.js';

/**
 * Sends block r of the root's `input` (one block per rank, rank order, counts[r] elements) to
 * rank r's `output` (counts[rank] elements). Non-roots pass `input` = undefined (it is ignored
 * there). Every rank passes the same counts, root, tag and options.
 *
 * @example
 *   await treeScatter(transport, rank === 0 ? shards : undefined, myShard, counts, 0, tag);
 */
export async function treeScatter(
  transport: Transport,
  input: TypedArray | undefined,
  output: TypedArray,
  counts: readonly number[],
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  const dtype = checkTreeArguments(transport, output, 'output', counts, root);
  if (rank === root) {
    if (input === undefined) throw new InvalidArgumentError('input is required on the root');
    checkSameDType(input, 'input', dtype);
    const total = counts.reduce((a, b) => a + b, 0);
    if (input.length !== total) {
      throw new InvalidArgumentError(`input has ${input.length} elements but the counts add up to ${total}`);
    }
  }
  const resolved = resolveOptions(options);
  const depth = resolved.pipelineDepth;
  const layout = new TreeLayout(rank, size, root, counts, resolved.segmentBytes, output.BYTES_PER_ELEMENT);
  const { offsets } = layout;
  const own = offsets[layout.v];
  const ownEnd = offsets[layout.v + 1];
  // Farthest child first, every range top piece first (above).
  const sends = [...layout.children]
    .reverse()
    .flatMap((c) => layout.pieces(layout.rankOf(c), offsets[c], offsets[layout.subtreeEndOf(c)]).reverse());
  if (rank === root) {
    const source = input as TypedArray;
    const start = layout.rankOrderOffset(own);
    (output as Float64Array).set((source as Float64Array).subarray(start, start + ownEnd - own));
    if (sends.length === 0) return;
    const full = Number.NEGATIVE_INFINITY;
    await runPipeline(new RangePlan(transport, tag, depth, sends, [], full, layout.rankOrderStore(source), true));
    return;
  }
  const end = offsets[layout.end];
  const recvs = layout.pieces(layout.rankOf(layout.parentV), own, end).reverse();
  if (recvs.length === 0) return;
  if (sends.length === 0) {
    // A leaf, or a node whose children get nothing: its range is its own block.
    await runPipeline(new RangePlan(transport, tag, depth, [], recvs, end, rangeStore(output, own), true));
    return;
  }
  await withScratch(dtype, end - own, resolved.pool, async (scratch) => {
    await runPipeline(new RangePlan(transport, tag, depth, sends, recvs, end, rangeStore(scratch, own), true));
    (output as Float64Array).set((scratch as Float64Array).subarray(0, ownEnd - own));
  });
}
