/**
 * alltoall: rank i sends splits_i[j] rows (first dimension) of its tensor to rank j, in order;
 * rank j receives, in rank order, splits_0[j], splits_1[j], ... rows. Ranks agree on dtype and the
 * dimensions after the first; each rank's splits must add up to its first dimension (checked at
 * the caller's edge). The agreement carries every rank's splits (an N × N matrix, row i being
 * rank i's), so it is never cached. The output is allocated once the received rows are known,
 * unless the caller passed 'out', whose length rank 0 checks against the rows that rank receives
 * so that a wrong one fails on every rank alike.
 */
import { alltoall } from '../../algorithms/alltoall.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { readCounts, withOutLength, writeCounts, writeOutLength } from '../wire/wire.js';
import { firstMismatch, kDTypeCheck, kNdimCheck, shapeText, trailingDimsCheck } from './agreement.js';
import type { OpEntry, OpSpec, Refusal, RequestBase } from './op_spec.js';

export interface AlltoallRequest extends RequestBase<'alltoall'> {
  /** Rows of this rank's tensor for each rank, in rank order. */
  splits: number[];
  /** With option 'out' only: its length in elements (rank 0 checks it against the rows received). */
  outLength?: number;
}

export const alltoallOp: OpSpec<AlltoallRequest> = {
  op: 'alltoall',
  write(w, r) {
    writeCounts(w, r.splits);
    writeOutLength(w, r.outLength);
  },
  read: (r, base) => withOutLength(r, { ...base, splits: readCounts(r, 'splits') }),
  agree(name, requests) {
    const refusal = firstMismatch(name, requests, [kDTypeCheck, kNdimCheck, trailingDimsCheck('alltoall')]);
    if (refusal) return refusal;
    for (const [rank, request] of requests.entries()) {
      if (request.splits.length !== requests.length) return wrongSplits(name, rank, request, requests.length);
    }
    return checkOuts(name, requests) ?? { request: requests[0] as AlltoallRequest, counts: requests.flatMap((r) => r.splits) };
  },
  cacheable: false,
  async execute(ctx, { counts: matrix }, entries) {
    const entry = entries[0] as OpEntry<AlltoallRequest>;
    const { request } = entry;
    const input = entry.buffer;
    if (!input) throw new Error(`alltoall '${request.name}' reached the executor without its input`);
    const { rank, size } = ctx.transport;
    const rowSize = elementCount(request.shape.slice(1));
    const received = Array.from({ length: size }, (_, from) => matrix[from * size + rank] ?? 0);
    const sendCounts = request.splits.map((rows) => rows * rowSize);
    const recvCounts = received.map((rows) => rows * rowSize);
    const rows = received.reduce((a, b) => a + b, 0);
    const output = entry.output ?? allocShared(request.dtype, rows * rowSize);
    const { native } = ctx;
    if (native?.alltoall && native.supports('alltoall', request.dtype)) {
      const nativeAlltoall = native.alltoall.bind(native);
      await ctx.communicate(input.byteLength, () => nativeAlltoall(input, sendCounts, output, recvCounts));
    } else {
      await ctx.communicate(input.byteLength, () =>
        alltoall(ctx.transport, input, sendCounts, output, recvCounts, ctx.tag, ctx.options),
      );
    }
    const shape = [rows, ...request.shape.slice(1)];
    return [entry.output ? { shape, counts: received } : { output, shape, counts: received }];
  },
};

function wrongSplits(name: string, rank: number, request: AlltoallRequest, size: number): Refusal {
  return {
    errorKind: 'InvalidArgumentError',
    message: `alltoall of tensor '${name}': rank ${rank} gave ${request.splits.length} splits for a job of ${size} ranks.`,
  };
}

/** Every rank that passed option 'out' must have passed the length of the rows it receives. */
function checkOuts(name: string, requests: readonly AlltoallRequest[]): Refusal | undefined {
  const rowSize = elementCount((requests[0] as AlltoallRequest).shape.slice(1));
  for (const [rank, request] of requests.entries()) {
    if (request.outLength === undefined) continue;
    const received = requests.map((r) => r.splits[rank] ?? 0);
    const length = received.reduce((a, b) => a + b, 0) * rowSize;
    if (request.outLength === length) continue;
    return {
      errorKind: 'InvalidArgumentError',
      message:
        `Wrong 'out' for alltoall of tensor '${name}': rank ${rank}'s has ${request.outLength} elements, ` +
        `it receives ${length} (rows ${shapeText(received)} × ${rowSize} elements per row).`,
    };
  }
  return undefined;
}
