/**
 * Binomial-tree reduce to any root.
 *
 * How it works, with v = (rank - root) mod N: the tree of broadcast.ts upside down. v takes the
 * partial results of its children v + 1, v + 2, v + 4, ... (below the lowest set bit of v),
 * reduces each into `buf` in that order, and sends `buf` to its parent v - 2^j. The order is
 * fixed by N and the root alone, whatever the timing, so the root's result is the same bits on
 * every run, floats included: (((b_v op s_{v+1}) op s_{v+2}) op s_{v+4}) ... at every node.
 *
 * The buffer is cut into segments of `segmentBytes` that flow as a pipeline: a node sends
 * segment k up as soon as all its children's segment k are reduced in, while the next segments
 * arrive in receive scratch (pipelineDepth segments, from the pool). Deadlock freedom,
 * rendezvous included: key each message by (segment, level of its sender); every dependency
 * (the windows of runPipeline, the children taken nearest first, forwarding) points at a smaller
 * key, so the smallest unfinished message always has both ends posted.
 *
 * Cost: ceil(log2 N) levels, each non-root sends the buffer (M bytes) once, and a node receives
 * M per child: the root receives ceil(log2 N)·M, which bounds a large reduce at about
 * log2(N)·M / bandwidth (plus one segment per level). That is the latency-optimal shape; for very
 * large buffers a reduce-scatter followed by a gather moves only 2(N-1)/N·M per rank.
 */
import { InvalidArgumentError } from '../core/errors.js';
import type { ReduceOp, TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import { elementwiseOf, type FinishReduce, finishOf, type ReduceKernel, reduceDType } from './reduce.js';
import { segmentCount, segmentLength } from './segments.js';
import { TreeLayout, withScratch } from './tree_gather.js';

/**
 * Reduces `buf` element-wise across all ranks into the root's `buf`. `buf` is work space on
 * every rank: non-roots' buffers hold partial results afterwards. Every rank passes the same
 * length, dtype, op, root, tag and options. 'average' is for float dtypes only, 'band', 'bor' and 'bxor' for integer ones only.
 *
 * @example
 *   await treeReduce(transport, metrics, 'sum', 0, tag, { pool });
 */
export async function treeReduce(
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
  // Only the tree's shape matters here: no blocks.
  const tree = new TreeLayout(rank, size, root, new Array<number>(size).fill(0), 1, 1);
  const segment = Math.max(1, Math.floor(resolved.segmentBytes / buf.BYTES_PER_ELEMENT));
  const depth = resolved.pipelineDepth;
  const children = tree.children.map((c) => tree.rankOf(c));
  const parent = tree.parentV < 0 ? undefined : tree.rankOf(tree.parentV);
  // Only the root finishes (an average): the others pass partial sums up.
  const finish = parent === undefined ? finishOf(op, size) : undefined;
  const plan = (scratch: TypedArray | undefined, slot: number) =>
    new ReducePlan(transport, buf, tag, depth, segment, parent, children, kernel, finish, scratch, slot);
  if (children.length === 0) {
    await runPipeline(plan(undefined, 0));
    return;
  }
  const slot = Math.min(segment, buf.length);
  await withScratch(dtype, depth * slot, resolved.pool, (scratch) => runPipeline(plan(scratch, slot)));
}

function bytesAt(array: TypedArray, offset: number, length: number): Uint8Array {
  const size = array.BYTES_PER_ELEMENT;
  return new Uint8Array(array.buffer, array.byteOffset + offset * size, length * size);
}

/** Receives: segment by segment, each from every child nearest first. Sends: segment by segment, up. */
class ReducePlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  private readonly segments: number;
  private sent = 0;
  private received = 0;
  private finished = 0;

  constructor(
    private readonly transport: Transport,
    private readonly buf: TypedArray,
    private readonly tag: number,
    readonly depth: number,
    private readonly segment: number,
    private readonly parent: number | undefined,
    private readonly children: readonly number[],
    private readonly kernel: ReduceKernel,
    private readonly finish: FinishReduce | undefined,
    private readonly scratch: TypedArray | undefined,
    private readonly slotElements: number,
  ) {
    this.segments = segmentCount(buf.length, segment);
    this.sends = parent === undefined ? 0 : this.segments;
    this.recvs = this.segments * children.length;
  }

  canSend(recvsDone: number): boolean {
    return recvsDone >= (this.sent + 1) * this.children.length;
  }

  startSend(): Promise<void> {
    const k = this.sent++;
    const length = segmentLength(this.buf.length, this.segment, k);
    return this.transport.send(this.parent as number, this.tag, bytesAt(this.buf, k * this.segment, length));
  }

  startRecv(slot: number): Promise<void> {
    const index = this.received++;
    const k = Math.floor(index / this.children.length);
    const child = this.children[index % this.children.length];
    const length = segmentLength(this.buf.length, this.segment, k);
    return this.transport.recv(child, this.tag, bytesAt(this.scratch as TypedArray, slot * this.slotElements, length));
  }

  finishRecv(slot: number): void {
    const index = this.finished++;
    const k = Math.floor(index / this.children.length);
    const offset = k * this.segment;
    const length = segmentLength(this.buf.length, this.segment, k);
    this.kernel(this.buf, offset, this.scratch as TypedArray, slot * this.slotElements, length);
    if (this.finish && index % this.children.length === this.children.length - 1) this.finish(this.buf, offset, length);
  }
}
