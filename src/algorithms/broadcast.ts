/**
 * Broadcast from any root: a binomial tree for small messages, a pipelined chain or scatter +
 * allgather for large ones.
 *
 * How it works, with v = (rank - root) mod N the rank relative to the root:
 * - Binomial tree: v receives the whole message from v - 2^j (2^j its lowest set bit), then
 *   sends it to v + 2^i for every 2^i below that bit. ceil(log2 N) rounds, so the latency is
 *   log N messages; but the root sends the message log N times, so the time of a large one is
 *   log N × M / bandwidth.
 * - Chain: the message is cut into K segments that flow along the ring from the root,
 *   v receiving from v - 1 and forwarding each segment to v + 1 as soon as it arrived. Every link
 *   carries the message exactly once; the time is (N - 2 + K) segment times, which tends to
 *   M / bandwidth whatever N.
 * - Scatter + allgather (scatter_allgather_broadcast.ts): the root scatters N blocks down a
 *   binomial tree and Bruck's allgather spreads them; 2·⌈log2 N⌉ messages and 2(N-1)/N·M bytes
 *   per rank, no pipeline fill that grows with N.
 * The switch: below kCostChoiceMinRanks ranks a message of at most `treeMaxBytes` (default: one
 * segment) goes by tree, where the chain's N - 1 sequential hops of a single segment would only
 * add latency, and a larger one by chain, as measured fastest on 2 and 4 ranks. From that many
 * ranks on, the cheapest of the three by the cost model (cost_model.ts): the tree for small
 * messages, scatter + allgather from about 64 KiB, the chain for messages of many segments on
 * few ranks (its pipeline fill is then small). An algorithm forced in the options
 * (RINGREDUCE_ALGORITHMS) runs whatever the size. Every rank decides from the same length and options.
 */
import type { AlgorithmOf } from '../core/algorithm_names.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import { bytesOf, type Transport } from '../transport/transport.js';
import { chainBroadcastCost, kCostChoiceMinRanks, scatterAllgatherBroadcastCost, treeBroadcastCost } from './cost_model.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import { scatterAllgatherBroadcast } from './scatter_allgather_broadcast.js';
import { segmentCount, segmentLength } from './segments.js';

export type BroadcastAlgorithm = AlgorithmOf<'broadcast'>;

/** The algorithm every rank runs for a broadcast of `bytes` on `ranks` ranks. */
export function broadcastAlgorithm(ranks: number, bytes: number, options: ResolvedOptions): BroadcastAlgorithm {
  const forced = options.algorithms?.broadcast;
  if (forced !== undefined) return forced;
  if (ranks < kCostChoiceMinRanks) return bytes <= options.treeMaxBytes ? 'tree' : 'chain';
  const { segmentBytes, costModel } = options;
  const costs: [BroadcastAlgorithm, number][] = [
    ['tree', treeBroadcastCost(ranks, bytes, costModel)],
    ['scatter_allgather', scatterAllgatherBroadcastCost(ranks, bytes, segmentBytes, costModel)],
    ['chain', chainBroadcastCost(ranks, bytes, segmentBytes, costModel)],
  ];
  // The first of the cheapest: ties go to the tree, then scatter + allgather.
  return costs.reduce((best, c) => (c[1] < best[1] ? c : best))[0];
}

/**
 * Copies `buf` of rank `root` into `buf` of every other rank. Every rank passes the same length,
 * root, tag and options.
 *
 * @example
 *   await broadcast(transport, weights, 0, tag);
 */
export async function broadcast(
  transport: Transport,
  buf: TypedArray,
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { size } = transport;
  if (!Number.isSafeInteger(root) || root < 0 || root >= size) {
    throw new InvalidArgumentError(`root must be a rank in [0, ${size}), got ${root}`);
  }
  const resolved = resolveOptions(options);
  const bytes = bytesOf(buf);
  if (size === 1 || bytes.byteLength === 0) return;
  switch (broadcastAlgorithm(size, bytes.byteLength, resolved)) {
    case 'tree':
      await treeBroadcast(transport, bytes, root, tag);
      return;
    case 'scatter_allgather':
      await scatterAllgatherBroadcast(transport, bytes, root, tag, options);
      return;
    case 'chain':
      await runPipeline(new ChainPlan(transport, bytes, root, tag, resolved.segmentBytes, resolved.pipelineDepth));
  }
}

/** The binomial tree alone, whatever the length (broadcast() chooses; the simulator compares). */
export async function treeBroadcast(transport: Transport, bytes: Uint8Array, root: number, tag: number): Promise<void> {
  const { rank, size } = transport;
  const v = (rank - root + size) % size;
  let mask = 1;
  while (mask < size) {
    if (v & mask) {
      await transport.recv((v - mask + root) % size, tag, bytes);
      break;
    }
    mask <<= 1;
  }
  const sends: Promise<void>[] = [];
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < size) sends.push(transport.send((v + mask + root) % size, tag, bytes));
  }
  // Wait for every send, even after a failure: the caller must not touch `bytes` while one reads it.
  const results = await Promise.allSettled(sends);
  for (const result of results) if (result.status === 'rejected') throw result.reason;
}

/** The chain alone, whatever the length and rank count (broadcast() chooses; the simulator compares). */
export function chainBroadcast(
  transport: Transport,
  bytes: Uint8Array,
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { segmentBytes, pipelineDepth } = resolveOptions(options);
  return runPipeline(new ChainPlan(transport, bytes, root, tag, segmentBytes, pipelineDepth));
}

class ChainPlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  private readonly prev: number;
  private readonly next: number;
  private sent = 0;
  private received = 0;

  constructor(
    private readonly transport: Transport,
    private readonly bytes: Uint8Array,
    root: number,
    private readonly tag: number,
    private readonly segment: number,
    readonly depth: number,
  ) {
    const { rank, size } = transport;
    const v = (rank - root + size) % size;
    const count = segmentCount(bytes.byteLength, segment);
    this.sends = v === size - 1 ? 0 : count;
    this.recvs = v === 0 ? 0 : count;
    this.prev = (rank - 1 + size) % size;
    this.next = (rank + 1) % size;
  }

  canSend(recvsDone: number): boolean {
    return this.recvs === 0 || recvsDone > this.sent;
  }

  startSend(): Promise<void> {
    return this.transport.send(this.next, this.tag, this.slice(this.sent++));
  }

  startRecv(): Promise<void> {
    return this.transport.recv(this.prev, this.tag, this.slice(this.received++));
  }

  finishRecv(): void {}

  private slice(k: number): Uint8Array {
    const start = k * this.segment;
    return this.bytes.subarray(start, start + segmentLength(this.bytes.byteLength, this.segment, k));
  }
}
