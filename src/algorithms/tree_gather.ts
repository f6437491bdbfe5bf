/**
 * Binomial-tree gather with per-rank block sizes (gatherv), and the tree machinery that
 * tree_scatter.ts mirrors.
 *
 * How it works, with v = (rank - root) mod N the rank relative to the root: v's subtree is the
 * relative ranks [v, v + 2^j), 2^j the lowest set bit of v (the whole world for the root), and
 * its children are v + 1, v + 2, v + 4, ... below that bit, as in broadcast.ts. Laid out in
 * relative-rank order the blocks of a subtree are contiguous, so each node gathers its own block
 * and its children's subtrees into one scratch range and sends that range to its parent as one
 * message. Relative order is rank order rotated by the root, so the root lands every piece
 * straight in `out` at its rank-order position, but for the one piece that straddles the end of
 * `out` (where rank order wraps around to rank 0), which it stages and copies in two parts.
 *
 * Pipelining: messages are cut on one global grid of `segmentBytes` cells over the relative
 * layout, the same on every rank whatever the message, and a node forwards
 * a piece as soon as every piece below it has arrived, instead of waiting for its whole subtree.
 * Deadlock freedom, rendezvous included: key every piece by (grid cell, level of its sender in
 * the tree); every dependency (the windows of runPipeline, forwarding, the order in which a parent
 * takes its children) points at a smaller key, so the smallest unfinished piece in the job always
 * has both its send and its receive posted.
 *
 * Cost: ceil(log2 N) rounds. The root receives sum(counts) - counts[root] elements, from
 * ceil(log2 N) children; a non-root sends its subtree's elements once, so a block crosses as many
 * links as its rank is deep in the tree (at most log2 N): more bytes on the wire than N - 1 direct
 * sends to the root, but log N messages at the root instead of N - 1, which is what counts for
 * the small blocks gather is used for. Intermediate nodes hold their subtree in scratch.
 */
import { constructorOf, dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray, WireDType } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import { blocksFromCounts } from './segments.js';

/**
 * Gathers every rank's `input` (counts[rank] elements) into the root's `out` (sum(counts)
 * elements, rank order). Non-roots pass `out` = undefined (it is ignored there). Every rank passes
 * the same counts, root, tag and options. `input` and `out` may overlap only if `input` is the
 * root's own block of `out`.
 *
 * @example
 *   await treeGather(transport, mine, rank === 0 ? all : undefined, counts, 0, tag);
 */
export async function treeGather(
  transport: Transport,
  input: TypedArray,
  out: TypedArray | undefined,
  counts: readonly number[],
  root: number,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  const dtype = checkTreeArguments(transport, input, 'input', counts, root);
  if (rank === root) {
    if (out === undefined) throw new InvalidArgumentError('out is required on the root');
    checkSameDType(out, 'out', dtype);
    const total = counts.reduce((a, b) => a + b, 0);
    if (out.length !== total) throw new InvalidArgumentError(`out has ${out.length} elements but the counts add up to ${total}`);
  }
  const resolved = resolveOptions(options);
  const layout = new TreeLayout(rank, size, root, counts, resolved.segmentBytes, input.BYTES_PER_ELEMENT);
  const own = layout.offsets[layout.v];
  const ownEnd = layout.offsets[layout.v + 1];
  const recvs = layout.children.flatMap((c) =>
    layout.pieces(layout.rankOf(c), layout.offsets[c], layout.offsets[layout.subtreeEndOf(c)]),
  );
  if (rank === root) {
    const target = out as TypedArray;
    // set() copies as if through a temporary, so an input that is already in place is harmless.
    (target as Float64Array).set(input as Float64Array, layout.rankOrderOffset(own));
    if (recvs.length === 0) return;
    await runPipeline(new RangePlan(transport, tag, resolved.pipelineDepth, [], recvs, ownEnd, layout.rankOrderStore(target)));
    return;
  }
  const sends = layout.pieces(layout.rankOf(layout.parentV), own, layout.offsets[layout.end]);
  if (sends.length === 0) return;
  if (recvs.length === 0) {
    // A leaf, or a node whose children gather nothing: its range is its own block.
    await runPipeline(new RangePlan(transport, tag, resolved.pipelineDepth, sends, [], ownEnd, rangeStore(input, own)));
    return;
  }
  const scratchLength = layout.offsets[layout.end] - own;
  await withScratch(dtype, scratchLength, resolved.pool, async (scratch) => {
    (scratch as Float64Array).set(input as Float64Array, 0);
    await runPipeline(new RangePlan(transport, tag, resolved.pipelineDepth, sends, recvs, ownEnd, rangeStore(scratch, own)));
  });
}

/** Checks what gather and scatter share; returns the dtype of `mine` (named `name`). */
export function checkTreeArguments(
  transport: Transport,
  mine: TypedArray,
  name: string,
  counts: readonly number[],
  root: number,
): WireDType {
  const { rank, size } = transport;
  if (!Number.isSafeInteger(root) || root < 0 || root >= size) {
    throw new InvalidArgumentError(`root must be a rank in [0, ${size}), got ${root}`);
  }
  if (counts.length !== size) {
    throw new InvalidArgumentError(`counts must have one entry per rank (${size}), got ${counts.length}`);
  }
  blocksFromCounts(counts); // each count a non-negative integer
  const dtype = dtypeOf(mine);
  if (dtype === undefined) throw new InvalidArgumentError(`${name} must be a supported typed array`);
  if (mine.length !== counts[rank]) {
    throw new InvalidArgumentError(`${name} has ${mine.length} elements but counts[${rank}] is ${counts[rank]}`);
  }
  return dtype;
}

export function checkSameDType(array: TypedArray, name: string, dtype: WireDType): void {
  const other = dtypeOf(array);
  if (other !== dtype) throw new InvalidArgumentError(`${name} must be a ${dtype} array, got ${other ?? 'an unsupported array'}`);
}

/** Runs `body` with a scratch array of `length` elements, from the pool when there is one. */
export async function withScratch(
  dtype: WireDType,
  length: number,
  pool: AlgorithmOptions['pool'],
  body: (scratch: TypedArray) => Promise<void>,
): Promise<void> {
  const Ctor = constructorOf(dtype);
  const bytes = length * Ctor.BYTES_PER_ELEMENT;
  const buffer = pool?.acquire(bytes) ?? new ArrayBuffer(bytes);
  try {
    await body(new Ctor(buffer, 0, length));
  } finally {
    // runPipeline settles only when nothing is in flight, so no receive can still land here.
    if (pool) pool.release(buffer);
  }
}

/** A message piece: elements [start, end) of the relative layout, exchanged with `peer`. */
export interface Piece {
  readonly peer: number;
  readonly start: number;
  readonly end: number;
}

/** Where the pieces of a node live, by relative element positions. */
export interface Store {
  /** The bytes of elements [start, end) to send; unchanged until the send resolves. */
  read(start: number, end: number): Uint8Array;
  /** Where to receive elements [start, end); `landed` is called once they have arrived. */
  write(start: number, end: number): Uint8Array;
  landed(start: number, end: number, bytes: Uint8Array): void;
}

function bytesAt(array: TypedArray, offset: number, length: number): Uint8Array {
  const size = array.BYTES_PER_ELEMENT;
  return new Uint8Array(array.buffer, array.byteOffset + offset * size, length * size);
}

/** A store holding the relative range that starts at `base` in `array`. */
export function rangeStore(array: TypedArray, base: number): Store {
  const at = (start: number, end: number) => bytesAt(array, start - base, end - start);
  return { read: at, write: at, landed: () => {} };
}

/** The binomial tree relative to the root, and the relative layout of the blocks on it. */
export class TreeLayout {
  /** This rank relative to the root. */
  readonly v: number;
  /** The parent's relative rank (-1 at the root). */
  readonly parentV: number;
  /** Relative ranks of the children, nearest first: v + 1, v + 2, v + 4, ... */
  readonly children: readonly number[] = [];
  /** One past the last relative rank of this rank's subtree. */
  readonly end: number;
  /** offsets[u]: first element of relative rank u's block; offsets[N] is the total. */
  readonly offsets: readonly number[];
  /** The relative position of rank 0's block, where rank order wraps around (0 for root 0). */
  readonly wrap: number;
  private readonly segment: number;

  constructor(
    rank: number,
    private readonly size: number,
    private readonly root: number,
    counts: readonly number[],
    segmentBytes: number,
    bytesPerElement: number,
  ) {
    const v = (rank - root + size) % size;
    this.v = v;
    // The lowest set bit of v; for the root, the first power of two >= N.
    let low = 1;
    while (low < size && (v & low) === 0) low <<= 1;
    this.parentV = v === 0 ? -1 : v - low;
    for (let mask = 1; mask < low && v + mask < size; mask <<= 1) (this.children as number[]).push(v + mask);
    this.end = Math.min(v + low, size);
    const offsets = [0];
    for (let u = 0; u < size; u++) offsets.push(offsets[u] + counts[this.rankOf(u)]);
    this.offsets = offsets;
    this.wrap = offsets[(size - root) % size];
    this.segment = Math.max(1, Math.floor(segmentBytes / bytesPerElement));
  }

  rankOf(u: number): number {
    return (u + this.root) % this.size;
  }

  /** One past the last relative rank of the subtree of `child`, a child of this node. */
  subtreeEndOf(child: number): number {
    return Math.min(child + (child - this.v), this.size);
  }

  /** Where relative element `position` sits in rank order. */
  rankOrderOffset(position: number): number {
    const total = this.offsets[this.size];
    return position < this.wrap ? position + (total - this.wrap) : position - this.wrap;
  }

  /**
   * The root's store: `out` in rank order. The one piece that straddles the wrap point (the end
   * of `out`, then its start) goes through a staging copy; every other piece is a view of `out`.
   */
  rankOrderStore(out: TypedArray): Store {
    const size = out.BYTES_PER_ELEMENT;
    const wrap = this.wrap;
    const tail = this.rankOrderOffset(0); // where relative element 0 sits in `out`
    const straddles = (start: number, end: number) => start < wrap && wrap < end;
    const direct = (start: number, end: number) => bytesAt(out, this.rankOrderOffset(start), end - start);
    return {
      read: (start, end) => {
        if (!straddles(start, end)) return direct(start, end);
        const staged = new Uint8Array((end - start) * size);
        staged.set(bytesAt(out, tail + start, wrap - start), 0);
        staged.set(bytesAt(out, 0, end - wrap), (wrap - start) * size);
        return staged;
      },
      write: (start, end) => (straddles(start, end) ? new Uint8Array((end - start) * size) : direct(start, end)),
      landed: (start, end, bytes) => {
        if (!straddles(start, end)) return;
        bytesAt(out, tail + start, wrap - start).set(bytes.subarray(0, (wrap - start) * size));
        bytesAt(out, 0, end - wrap).set(bytes.subarray((wrap - start) * size));
      },
    };
  }

  /** Relative elements [start, end) cut on the global grid, exchanged with `peer`. */
  pieces(peer: number, start: number, end: number): Piece[] {
    const out: Piece[] = [];
    for (let position = start; position < end; ) {
      const next = Math.min(end, (Math.floor(position / this.segment) + 1) * this.segment);
      out.push({ peer, start: position, end: next });
      position = next;
    }
    return out;
  }
}

/**
 * A stream of received pieces and a stream of sent pieces over one node's store, both in
 * ascending position (gather) or both in descending position (scatter, `descending`); a piece is
 * sent once everything from the first received position to its far end has arrived. `arrived` is
 * where the store is complete before any receive: below it when ascending (Infinity when it starts
 * full), from it up when descending (-Infinity when it starts full).
 */
export class RangePlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  private sent = 0;
  private received = 0;
  private finished = 0;
  private readonly landing: Uint8Array[] = [];

  constructor(
    private readonly transport: Transport,
    private readonly tag: number,
    readonly depth: number,
    private readonly sendPieces: readonly Piece[],
    private readonly recvPieces: readonly Piece[],
    private readonly arrived: number,
    private readonly store: Store,
    private readonly descending = false,
  ) {
    this.sends = sendPieces.length;
    this.recvs = recvPieces.length;
  }

  canSend(recvsDone: number): boolean {
    const last = this.recvPieces[recvsDone - 1];
    const next = this.sendPieces[this.sent];
    if (this.descending) return next.start >= (last === undefined ? this.arrived : last.start);
    return next.end <= (last === undefined ? this.arrived : last.end);
  }

  startSend(): Promise<void> {
    const { peer, start, end } = this.sendPieces[this.sent++];
    return this.transport.send(peer, this.tag, this.store.read(start, end));
  }

  startRecv(slot: number): Promise<void> {
    const { peer, start, end } = this.recvPieces[this.received++];
    const into = this.store.write(start, end);
    this.landing[slot] = into;
    return this.transport.recv(peer, this.tag, into);
  }

  finishRecv(slot: number): void {
    const { start, end } = this.recvPieces[this.finished++];
    this.store.landed(start, end, this.landing[slot]);
  }
}
