/**
 * All-to-all with per-pair block sizes (alltoallv), by pairwise exchange.
 *
 * How it works: at step s = 1 .. N - 1 rank r sends its block for (r + s) mod N and receives the
 * block of (r - s) mod N, straight from `input` and into `output`; its own block is a local copy.
 * Every pair of ranks talks at exactly one step, in each direction, so each link carries one
 * message stream and no rank is the target of two senders at once within a step. Blocks are cut
 * into segments of at most `segmentBytes`, and runPipeline keeps at most pipelineDepth segments
 * in flight per direction, spanning as many steps as that window covers (several steps at once
 * when blocks are small, one segment train when they are large): a 1 GiB exchange holds
 * depth × segmentBytes on the wire, not the whole input. Receives are posted independently of
 * sends, so rendezvous transports cannot deadlock: key every segment by (step, index in its
 * block), the same on both ends; the windows only wait on smaller keys, so the smallest
 * unfinished segment in the job always has both ends posted.
 *
 * Cost: N - 1 steps. Rank r sends sum(sendCounts) - sendCounts[r] elements and receives
 * sum(recvCounts) - recvCounts[r], each exactly once over the direct link, which is optimal for a
 * personalised exchange; zero-length blocks cost no message.
 */
import { dtypeOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import type { Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { type PipelinePlan, runPipeline } from './pipeline.js';
import { blocksFromCounts, segmentCount, segmentLength } from './segments.js';

/**
 * Sends sendCounts[j] elements of `input` to each rank j and receives recvCounts[j] elements from
 * each rank j into `output`, both in rank order, back to back. recvCounts[j] on rank r must equal
 * sendCounts[r] on rank j; every rank passes the same tag and options. `input` and `output` must
 * not overlap.
 *
 * @example
 *   await alltoall(transport, tokens, [2, 0, 5], routed, [2, 3, 1], tag);
 */
export async function alltoall(
  transport: Transport,
  input: TypedArray,
  sendCounts: readonly number[],
  output: TypedArray,
  recvCounts: readonly number[],
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const { rank, size } = transport;
  const dtype = dtypeOf(input);
  if (dtype === undefined) throw new InvalidArgumentError('input must be a supported typed array');
  if (dtypeOf(output) !== dtype) throw new InvalidArgumentError(`output must be a ${dtype} array like input`);
  const sent = checkCounts('sendCounts', sendCounts, size, 'input', input);
  const received = checkCounts('recvCounts', recvCounts, size, 'output', output);
  if (sendCounts[rank] !== recvCounts[rank]) {
    throw new InvalidArgumentError(
      `recvCounts[${rank}] (${recvCounts[rank]}) must equal sendCounts[${rank}] (${sendCounts[rank]}): this rank's own block`,
    );
  }
  const resolved = resolveOptions(options);
  const own = (input as Float64Array).subarray(sent.offsets[rank], sent.offsets[rank] + sendCounts[rank]);
  (output as Float64Array).set(own, received.offsets[rank]);
  if (size === 1) return;
  const segment = Math.max(1, Math.floor(resolved.segmentBytes / input.BYTES_PER_ELEMENT));
  const sends: Segment[] = [];
  const recvs: Segment[] = [];
  for (let s = 1; s < size; s++) {
    const to = (rank + s) % size;
    const from = (rank - s + size) % size;
    cut(sends, input, to, sent.offsets[to], sendCounts[to], segment);
    cut(recvs, output, from, received.offsets[from], recvCounts[from], segment);
  }
  if (sends.length === 0 && recvs.length === 0) return;
  await runPipeline(new ExchangePlan(transport, tag, resolved.pipelineDepth, sends, recvs));
}

function checkCounts(name: string, counts: readonly number[], size: number, arrayName: string, array: TypedArray) {
  if (counts.length !== size) {
    throw new InvalidArgumentError(`${name} must have one entry per rank (${size}), got ${counts.length}`);
  }
  const blocks = blocksFromCounts(counts);
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== array.length) {
    throw new InvalidArgumentError(`${arrayName} has ${array.length} elements but ${name} add up to ${total}`);
  }
  return blocks;
}

interface Segment {
  readonly peer: number;
  readonly bytes: Uint8Array;
}

/** Appends the segments of the `length` elements at `offset` of `array`, exchanged with `peer`. */
function cut(into: Segment[], array: TypedArray, peer: number, offset: number, length: number, segment: number): void {
  const size = array.BYTES_PER_ELEMENT;
  for (let k = 0; k < segmentCount(length, segment); k++) {
    const start = array.byteOffset + (offset + k * segment) * size;
    into.push({ peer, bytes: new Uint8Array(array.buffer, start, segmentLength(length, segment, k) * size) });
  }
}

class ExchangePlan implements PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  private sent = 0;
  private received = 0;

  constructor(
    private readonly transport: Transport,
    private readonly tag: number,
    readonly depth: number,
    private readonly sendSegments: readonly Segment[],
    private readonly recvSegments: readonly Segment[],
  ) {
    this.sends = sendSegments.length;
    this.recvs = recvSegments.length;
  }

  canSend(): boolean {
    return true;
  }

  startSend(): Promise<void> {
    const { peer, bytes } = this.sendSegments[this.sent++];
    return this.transport.send(peer, this.tag, bytes);
  }

  startRecv(): Promise<void> {
    const { peer, bytes } = this.recvSegments[this.received++];
    return this.transport.recv(peer, this.tag, bytes);
  }

  finishRecv(): void {}
}
