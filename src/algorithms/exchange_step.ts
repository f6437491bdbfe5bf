/**
 * One step of the logarithmic algorithms (Bruck's allgather, recursive halving, Rabenseifner's
 * allreduce): ranges of the buffer sent to one peer while ranges of it arrive from another (or
 * the same one), each either landing in place or reduced into place.
 *
 * How it works: the ranges are cut into segments of `segmentBytes` and streamed through
 * runPipeline (pipeline.ts): at most `pipelineDepth` sends and receives in flight, a received
 * segment reduced out of its scratch slot while the next ones are on the wire, so a large step
 * needs only depth × segment bytes of scratch and overlaps its reductions with the transfer. No
 * send of a step waits for a receive of the same step (the algorithms never send what they
 * receive in the same step), and the steps run one after another, so a step sends only what
 * earlier steps completed. Sender and receiver compute the same ranges, hence the same segments.
 */
import { constructorOf, dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import type { ResolvedOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import type { FinishReduce, ReduceKernel } from './reduce.js';
import { segmentCount, segmentLength } from './segments.js';

/** Elements [offset, offset + length) of the buffer. */
export interface Range {
  readonly offset: number;
  readonly length: number;
}

export interface Step {
  /** The peer that gets `sends`, in order; ignored when there is nothing to send. */
  readonly to: number;
  readonly sends: readonly Range[];
  /** The peer whose `recvs` arrive, in order. */
  readonly from: number;
  readonly recvs: readonly Range[];
  /** Reduces what arrives into place (buf = buf op received); without it, it lands in place. */
  readonly kernel?: ReduceKernel;
}

/**
 * Runs steps over one buffer with one scratch area: `reduceElements` is the longest range any
 * reducing step receives (it bounds the scratch to depth × min(segment, that)).
 */
export class StepRunner {
  readonly depth: number;
  private readonly segment: number;
  private readonly slotElements: number;
  private readonly scratchBuffer: ArrayBuffer | undefined;
  private readonly scratch: TypedArray | undefined;

  constructor(
    private readonly transport: Transport,
    private readonly buf: TypedArray,
    private readonly tag: number,
    private readonly options: ResolvedOptions,
    reduceElements: number,
  ) {
    const dtype = dtypeOf(buf);
    if (dtype === undefined) throw new InvalidArgumentError('buf must be a supported typed array');
    this.depth = options.pipelineDepth;
    this.segment = Math.max(1, Math.floor(options.segmentBytes / buf.BYTES_PER_ELEMENT));
    this.slotElements = Math.min(this.segment, reduceElements);
    const bytes = options.pipelineDepth * this.slotElements * buf.BYTES_PER_ELEMENT;
    this.scratchBuffer = bytes === 0 ? undefined : (options.pool?.acquire(bytes) ?? new ArrayBuffer(bytes));
    this.scratch =
      this.scratchBuffer && new (constructorOf(dtype))(this.scratchBuffer, 0, options.pipelineDepth * this.slotElements);
  }

  run(step: Step): Promise<void> {
    return runPipeline(new StepPlan(this, step));
  }

  /** Applies `finish` (an average's division) to the ranges. */
  finish(finish: FinishReduce | undefined, ranges: readonly Range[]): void {
    if (finish) for (const { offset, length } of ranges) finish(this.buf, offset, length);
  }

  /** Hands the scratch back; call once every step has settled (runPipeline settles only when nothing is in flight). */
  release(): void {
    if (this.scratchBuffer && this.options.pool) this.options.pool.release(this.scratchBuffer);
  }

  /** @internal */
  segments(ranges: readonly Range[]): Range[] {
    const out: Range[] = [];
    for (const { offset, length } of ranges) {
      const count = segmentCount(length, this.segment);
      for (let k = 0; k < count; k++) {
        out.push({ offset: offset + k * this.segment, length: segmentLength(length, this.segment, k) });
      }
    }
    return out;
  }

  /** @internal */
  send(peer: number, range: Range): Promise<void> {
    return this.transport.send(peer, this.tag, this.bytes(this.buf, range.offset, range.length));
  }

  /** @internal */
  recv(peer: number, range: Range, slot: number | undefined): Promise<void> {
    const into =
      slot === undefined
        ? this.bytes(this.buf, range.offset, range.length)
        : this.bytes(this.scratch as TypedArray, slot * this.slotElements, range.length);
    return this.transport.recv(peer, this.tag, into);
  }

  /** @internal */
  reduce(kernel: ReduceKernel, range: Range, slot: number): void {
    kernel(this.buf, range.offset, this.scratch as TypedArray, slot * this.slotElements, range.length);
  }

  private bytes(array: TypedArray, offset: number, length: number): Uint8Array {
    const size = array.BYTES_PER_ELEMENT;
    return new Uint8Array(array.buffer, array.byteOffset + offset * size, length * size);
  }
}

class StepPlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  readonly depth: number;
  private readonly sendSegments: Range[];
  private readonly recvSegments: Range[];
  private sent = 0;
  private posted = 0;
  private finished = 0;

  constructor(
    private readonly runner: StepRunner,
    private readonly step: Step,
  ) {
    this.sendSegments = runner.segments(step.sends);
    this.recvSegments = runner.segments(step.recvs);
    this.sends = this.sendSegments.length;
    this.recvs = this.recvSegments.length;
    this.depth = runner.depth;
  }

  canSend(): boolean {
    return true;
  }

  startSend(): Promise<void> {
    return this.runner.send(this.step.to, this.sendSegments[this.sent++] as Range);
  }

  startRecv(slot: number): Promise<void> {
    const range = this.recvSegments[this.posted++] as Range;
    return this.runner.recv(this.step.from, range, this.step.kernel ? slot : undefined);
  }

  finishRecv(slot: number): void {
    const range = this.recvSegments[this.finished++] as Range;
    if (this.step.kernel) this.runner.reduce(this.step.kernel, range, slot);
  }
}

/**
 * The elements of blocks [first, first + count) taken cyclically (block b mod N), as at most two
 * ranges of a buffer that holds the blocks back to back; empty ranges are left out.
 */
export function cyclicRanges(offsets: readonly number[], lengths: readonly number[], first: number, count: number): Range[] {
  const n = offsets.length;
  const end = (b: number) => (offsets[b] as number) + (lengths[b] as number);
  const start = ((first % n) + n) % n;
  const pieces: Range[] = [];
  const last = start + count - 1;
  if (count <= 0) return pieces;
  if (last < n) {
    pieces.push({ offset: offsets[start] as number, length: end(last) - (offsets[start] as number) });
  } else {
    pieces.push({ offset: offsets[start] as number, length: end(n - 1) - (offsets[start] as number) });
    pieces.push({ offset: offsets[0] as number, length: end(last - n) - (offsets[0] as number) });
  }
  return pieces.filter((r) => r.length > 0);
}
