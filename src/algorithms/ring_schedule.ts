/**
 * The ring schedule shared by ring allreduce and ring allgather.
 *
 * How it works: the buffer is cut into N blocks. At global step g rank r sends block
 * (r - g) mod N to its right neighbour r + 1 and receives block (r - g - 1) mod N from its left
 * neighbour r - 1. The block received at step g is the one sent at step g + 1, so the two
 * streams form a single pipeline at segment granularity: segment k of step g + 1 leaves as soon
 * as segment k of step g has arrived, without waiting for the rest of step g. The receives of
 * the first `reduceSteps` steps go to scratch and are reduced into the block (reduce-scatter);
 * the later ones land directly in the buffer (allgather).
 *
 * With `out` (reduce-scatter only), the last reduce step's receives, this rank's own block, land
 * in `out` instead of scratch and the buffer's block is reduced into them there: out = received
 * op local, which has the bits of local op received (every elementwise op is commutative; only a
 * NaN's payload may differ). No scratch for that step, and no copy of the result afterwards.
 *
 * Landing in place needs no guard: the block received at step g >= N - 1 was last sent by this
 * rank at step g + 1 - N, and the bytes that overwrite it are derived, hop by hop around the
 * ring, from that very send having been received, so no transport can deliver them before it
 * has read the old bytes.
 */
import { constructorOf, dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import type { ResolvedOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import type { ReduceKernel } from './reduce.js';
import { type Blocks, segmentCount, segmentLength } from './segments.js';

export type FinishSegment = (buf: TypedArray, offset: number, length: number) => void;

export interface RingSpec {
  /** One block per rank. */
  readonly blocks: Blocks;
  /** Global steps: 2(N - 1) for allreduce, N - 1 for allgather. */
  readonly steps: number;
  /** The leading steps whose receives are reduced into place; needs `kernel`. */
  readonly reduceSteps: number;
  readonly kernel?: ReduceKernel;
  /** Applied to each segment of the last reduce step, once it is fully reduced (average). */
  readonly finish?: FinishSegment;
  /**
   * Where the last reduce step's block goes instead of into `buf` (and `finish` applies there):
   * an array of `buf`'s dtype and that block's length, not overlapping `buf` (the caller checks).
   * Only for a ring that ends with its reduce steps (steps === reduceSteps >= 1).
   */
  readonly out?: TypedArray;
}

export async function runRing(
  transport: Transport,
  buf: TypedArray,
  tag: number,
  spec: RingSpec,
  options: ResolvedOptions,
): Promise<void> {
  const dtype = dtypeOf(buf);
  if (dtype === undefined) throw new InvalidArgumentError('buf must be a supported typed array');
  if (spec.reduceSteps > 0 && !spec.kernel) throw new InvalidArgumentError('a reducing ring needs a kernel');
  if (spec.out && (spec.reduceSteps < 1 || spec.steps !== spec.reduceSteps)) {
    throw new InvalidArgumentError('out is for a ring that ends with its reduce steps (a reduce-scatter)');
  }
  const segment = Math.max(1, Math.floor(options.segmentBytes / buf.BYTES_PER_ELEMENT));
  const { pipelineDepth: depth, pool } = options;
  let slotElements = 0;
  // With `out`, the last reduce step receives into it, not into scratch.
  for (let g = 0; g < spec.reduceSteps - (spec.out ? 1 : 0); g++) {
    const length = spec.blocks.lengths[mod(transport.rank - g - 1, transport.size)] ?? 0;
    slotElements = Math.max(slotElements, Math.min(segment, length));
  }
  const scratchBytes = depth * slotElements * buf.BYTES_PER_ELEMENT;
  const buffer = scratchBytes === 0 ? undefined : (pool?.acquire(scratchBytes) ?? new ArrayBuffer(scratchBytes));
  try {
    const scratch = buffer && new (constructorOf(dtype))(buffer, 0, depth * slotElements);
    await runPipeline(new RingPlan(transport, buf, tag, spec, segment, depth, scratch, slotElements));
  } finally {
    // runPipeline settles only when nothing is in flight, so the scratch is quiet here.
    if (buffer && pool) pool.release(buffer);
  }
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}

function view(array: TypedArray, offset: number, length: number): Uint8Array {
  const size = array.BYTES_PER_ELEMENT;
  return new Uint8Array(array.buffer, array.byteOffset + offset * size, length * size);
}

/** Walks (step, segment) pairs in order, skipping steps whose block is empty. */
class StepCursor {
  step = 0;
  k = 0;
  constructor(private readonly counts: readonly number[]) {
    this.skipEmpty();
  }
  advance(): void {
    this.k++;
    this.skipEmpty();
  }
  private skipEmpty(): void {
    while (this.step < this.counts.length && this.k >= this.counts[this.step]) {
      this.step++;
      this.k = 0;
    }
  }
}

class RingPlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  private readonly left: number;
  private readonly right: number;
  /** Index among the receives of the first segment of each step. */
  private readonly recvStart: number[] = [0];
  private readonly nextSend: StepCursor;
  private readonly nextRecv: StepCursor;
  private readonly nextFinish: StepCursor;

  constructor(
    private readonly transport: Transport,
    private readonly buf: TypedArray,
    private readonly tag: number,
    private readonly spec: RingSpec,
    private readonly segment: number,
    readonly depth: number,
    private readonly scratch: TypedArray | undefined,
    private readonly slotElements: number,
  ) {
    const { rank, size } = transport;
    this.left = mod(rank - 1, size);
    this.right = mod(rank + 1, size);
    const sendCounts: number[] = [];
    const recvCounts: number[] = [];
    for (let g = 0; g < spec.steps; g++) {
      sendCounts.push(segmentCount(this.blockLength(this.sendBlock(g)), segment));
      recvCounts.push(segmentCount(this.blockLength(this.recvBlock(g)), segment));
      this.recvStart.push(this.recvStart[g] + recvCounts[g]);
    }
    this.sends = sendCounts.reduce((a, b) => a + b, 0);
    this.recvs = this.recvStart[spec.steps];
    this.nextSend = new StepCursor(sendCounts);
    this.nextRecv = new StepCursor(recvCounts);
    this.nextFinish = new StepCursor(recvCounts);
  }

  canSend(recvsDone: number): boolean {
    const { step, k } = this.nextSend;
    // Forwarding: segment k of step g is what arrived as segment k of step g - 1.
    return step === 0 || recvsDone > this.recvStart[step - 1] + k;
  }

  startSend(): Promise<void> {
    const { step, k } = this.nextSend;
    const block = this.sendBlock(step);
    const offset = this.blockOffset(block) + k * this.segment;
    const length = segmentLength(this.blockLength(block), this.segment, k);
    this.nextSend.advance();
    return this.transport.send(this.right, this.tag, view(this.buf, offset, length));
  }

  startRecv(slot: number): Promise<void> {
    const { step, k } = this.nextRecv;
    const block = this.recvBlock(step);
    const length = segmentLength(this.blockLength(block), this.segment, k);
    this.nextRecv.advance();
    const { reduceSteps, out } = this.spec;
    let into: Uint8Array;
    if (out && step === reduceSteps - 1) into = view(out, k * this.segment, length);
    else if (step < reduceSteps) into = view(this.scratch as TypedArray, slot * this.slotElements, length);
    else into = view(this.buf, this.blockOffset(block) + k * this.segment, length);
    return this.transport.recv(this.left, this.tag, into);
  }

  finishRecv(slot: number): void {
    const { step, k } = this.nextFinish;
    this.nextFinish.advance();
    const { reduceSteps, kernel, finish, out } = this.spec;
    if (step >= reduceSteps) return;
    const block = this.recvBlock(step);
    const offset = this.blockOffset(block) + k * this.segment;
    const length = segmentLength(this.blockLength(block), this.segment, k);
    if (out && step === reduceSteps - 1) {
      // The segment landed in `out`: out = received op local.
      (kernel as ReduceKernel)(out, k * this.segment, this.buf, offset, length);
      if (finish) finish(out, k * this.segment, length);
      return;
    }
    (kernel as ReduceKernel)(this.buf, offset, this.scratch as TypedArray, slot * this.slotElements, length);
    if (finish && step === reduceSteps - 1) finish(this.buf, offset, length);
  }

  private sendBlock(step: number): number {
    return mod(this.transport.rank - step, this.transport.size);
  }

  private recvBlock(step: number): number {
    return mod(this.transport.rank - step - 1, this.transport.size);
  }

  private blockOffset(block: number): number {
    return this.spec.blocks.offsets[block];
  }

  private blockLength(block: number): number {
    return this.spec.blocks.lengths[block];
  }
}
