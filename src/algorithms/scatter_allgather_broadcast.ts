/**
 * Broadcast of a large message to many ranks by scatter then allgather (van de Geijn; Thakur,
 * Rabenseifner and Gropp 2005, section 4.1).
 *
 * How it works: the message is cut into N byte blocks, block r for rank r (evenBlocks). The root
 * scatters them down a binomial tree (tree_scatter.ts, farthest child first), so that every rank
 * holds its own block in place in its buffer; an allgather then fills in the other N - 1 blocks on
 * every rank. Which allgather is allgather.ts's choice (Bruck's, or the ring where its stream of
 * segments hides its N - 1 steps), except that for N a power of two Bruck's is replaced by
 * recursive doubling over the ranks relative to the root, v = (rank - root) mod N: at the step of
 * distance d = 1, 2, 4, ... v and v XOR d swap the d blocks each holds (relative blocks
 * [v & ~(d-1), +d), a run of rank order that may wrap). Its groups of 2d are subtrees of the
 * scatter's tree, so a subtree that the scatter served early gathers among itself while the root
 * still serves the others, where Bruck's partners r ± d would wait on, and send into, ranks still
 * receiving their scatter (1.3 to 1.6 times the formula in the simulator, against 1.0). Bytes are
 * moved as bytes: any dtype, and a length that N does not divide (the first length mod N blocks
 * are one byte longer; blocks may be empty).
 *
 * Cost, with M the message's bytes: the scatter is ⌈log2 N⌉·α + (N-1)/N·M·β (the root's stream,
 * the subtrees forwarding beneath it), recursive doubling or Bruck's allgather
 * ⌈log2 N⌉·α + (N-1)/N·M·β, in all
 *   2·⌈log2 N⌉·α + 2(N-1)/N·M·β,
 * the best known cost of a large broadcast. Against the chain's (N - 2 + K)·(α + S·β) with K
 * segments of S bytes, its bandwidth term stays below 2·M·β whatever N, while the chain's pipeline
 * fill (N - 2)·S·β grows with N; against the tree's ⌈log2 N⌉·(α + M·β), it sends 2M instead of
 * M·⌈log2 N⌉ (broadcast.ts chooses).
 *
 * Tags: both phases use the collective's tag and may share peers (a tree parent can be an
 * allgather partner). Each rank finishes every send and receive of the scatter before it posts any of
 * the allgather, and the transport matches first-in first-out per (peer, tag), so an allgather
 * message never meets a scatter receive.
 */
import type { Transport } from '../transport/transport.js';
import { allgather, allgatherAlgorithm } from './allgather.js';
import { cyclicRanges, type Range, StepRunner } from './exchange_step.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { type Blocks, evenBlocks } from './segments.js';
import { treeScatter } from './tree_scatter.js';

/**
 * Copies `bytes` of rank `root` into `bytes` of every other rank. Every rank passes the same
 * length, root, tag and options.
 *
 * @example
 *   await scatterAllgatherBroadcast(transport, bytesOf(weights), 0, tag);
 */
export async function scatterAllgatherBroadcast(
  transport: Transport,
  bytes: Uint8Array,
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  const { offsets, lengths } = evenBlocks(bytes.byteLength, size);
  const own = bytes.subarray(offsets[rank], (offsets[rank] as number) + (lengths[rank] as number));
  // On the root, `own` is a view of the input: the scatter's copy of its own block is a no-op.
  await treeScatter(transport, rank === root ? bytes : undefined, own, lengths, root, tag, options);
  const resolved = resolveOptions(options);
  const powerOfTwo = (size & (size - 1)) === 0;
  if (powerOfTwo && allgatherAlgorithm(lengths, resolved) === 'bruck') {
    await relativeDoublingAllgather(transport, bytes, { offsets, lengths }, root, tag, options);
  } else {
    await allgather(transport, bytes, lengths, tag, options);
  }
}

/** Recursive doubling's allgather of `blocks` over the ranks relative to `root` (N a power of two; above). */
async function relativeDoublingAllgather(
  transport: Transport,
  bytes: Uint8Array,
  blocks: Blocks,
  root: number,
  tag: number,
  options: AlgorithmOptions | undefined,
): Promise<void> {
  const { rank, size } = transport;
  const v = (rank - root + size) % size;
  const resolved = resolveOptions(options);
  const runner = new StepRunner(transport, bytes, tag, resolved, 0);
  const run = (first: number, count: number) => cyclicRanges(blocks.offsets, blocks.lengths, first + root, count);
  const bytesOf = (ranges: readonly Range[]) => ranges.reduce((total, r) => total + r.length, 0);
  try {
    for (let d = 1; d < size; d *= 2) {
      const peer = ((v ^ d) + root) % size;
      const sends = run(v & ~(d - 1), d);
      const recvs = run((v ^ d) & ~(d - 1), d);
      // The upper rank of a pair finished the scatter first (it streams top down). A stream of
      // several segments waits for a token from its partner, so that it does not queue on a link
      // still carrying the partner's scatter or earlier steps: one α against a stream's worth.
      const upper = (v & d) !== 0;
      if (bytesOf(upper ? sends : recvs) > resolved.segmentBytes) {
        if (upper) await transport.recv(peer, tag, kToken);
        else await transport.send(peer, tag, kToken);
      }
      await runner.run({ to: peer, sends, from: peer, recvs });
    }
  } finally {
    runner.release();
  }
}

const kToken = new Uint8Array(0);
