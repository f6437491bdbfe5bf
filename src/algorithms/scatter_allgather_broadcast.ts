/**
 * Broadcast of a large message to many ranks by scatter then allgather (van de Geijn; Thakur,
 * Rabenseifner and Gropp 2005, section 4.1).
 *
 * How it works: the message is cut into N byte blocks, block r for rank r (evenBlocks). The root
 * scatters them down a binomial tree (tree_scatter.ts), so that every rank holds its own block
 * in place in its buffer; a ring allgather (ring_allgather.ts) then fills in the other N - 1
 * blocks on every rank. Bytes are moved as bytes: any dtype, and a length that N does not divide
 * (the first length mod N blocks are one byte longer; blocks may be empty).
 *
 * Cost, with M the message's bytes: the scatter is ⌈log2 N⌉·α + (N-1)/N·M·β (pipelined down the
 * tree), the ring allgather (N-1)·α + (N-1)/N·M·β, in all
 *   (⌈log2 N⌉ + N - 1)·α + 2(N-1)/N·M·β.
 * Against the chain's (N - 2 + K)·(α + S·β) with K segments of S bytes, its bandwidth term stays
 * below 2·M·β whatever N, while the chain's pipeline fill (N - 2)·S·β grows with N: with many
 * ranks and segments of megabytes, scatter + allgather is the faster one (broadcast.ts chooses).
 *
 * Tags: both phases use the collective's tag and may share peers (a tree parent can be a ring
 * neighbour). Each rank finishes every send and receive of the scatter before it posts any of
 * the allgather, and the transport matches first-in first-out per (peer, tag), so an allgather
 * message never meets a scatter receive.
 */
import type { Transport } from '../transport/transport.js';
import type { AlgorithmOptions } from './options.js';
import { ringAllgather } from './ring_allgather.js';
import { evenBlocks } from './segments.js';
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
  await ringAllgather(transport, bytes, lengths, tag, options);
}
