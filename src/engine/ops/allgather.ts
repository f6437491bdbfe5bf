/**
 * allgather: every rank's tensor concatenated along the first dimension, in rank order, on every
 * rank. The first dimension may differ per rank (the agreement carries them all, so it is never
 * cached); the other dimensions and the dtype must agree. The output is allocated once the sizes
 * are known, unless the caller passed 'out', whose length rank 0 checks so that a wrong one fails
 * on every rank alike.
 */
import { allgather } from '../../algorithms/allgather.js';
import { allgatherRunsHierarchically, hierarchicalAllgather } from '../../algorithms/hierarchical_allgather.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { withOutLength, writeOutLength } from '../wire/wire.js';
import { firstMismatch, kDTypeCheck, kNdimCheck, shapeText, trailingDimsCheck } from './agreement.js';
import type { Agreement, OpEntry, OpSpec, Refusal, RequestBase } from './op_spec.js';

export interface AllgatherRequest extends RequestBase<'allgather'> {
  /** With option 'out' only: its length in elements (rank 0 checks it against the gathered size). */
  outLength?: number;
}

export const allgatherOp: OpSpec<AllgatherRequest> = {
  op: 'allgather',
  write: (w, r) => writeOutLength(w, r.outLength),
  read: (r, base) => withOutLength(r, base),
  agree(name, requests): Agreement<AllgatherRequest> | Refusal {
    const refusal = firstMismatch(name, requests, [kDTypeCheck, kNdimCheck, trailingDimsCheck('allgather')]);
    if (refusal) return refusal;
    const firstDims = requests.map((r) => r.shape[0] ?? 0);
    return checkOuts(name, requests, firstDims) ?? { request: requests[0] as AllgatherRequest, counts: firstDims };
  },
  cacheable: false,
  joined: {
    // A joined rank gives zero rows.
    adjust: (_name, agreement, joined) => ({
      ...agreement,
      counts: agreement.counts.map((rows, r) => (joined.includes(r) ? 0 : rows)),
    }),
    standIn: ({ request }) => ({
      request: { ...request, shape: [0, ...request.shape.slice(1)] },
      buffer: allocShared(request.dtype, 0),
    }),
  },
  async execute(ctx, { counts: firstDims }, entries) {
    const entry = entries[0] as OpEntry<AllgatherRequest>;
    const { shape, dtype } = entry.request;
    const rowSize = elementCount(shape.slice(1));
    const counts = firstDims.map((rows) => rows * rowSize);
    const total = counts.reduce((a, b) => a + b, 0);
    const output = entry.output ?? allocShared(dtype, total);
    let offset = 0;
    for (let r = 0; r < ctx.transport.rank; r++) offset += counts[r] ?? 0;
    if (entry.buffer) output.set(entry.buffer as never, offset);
    const { native, hierarchy, tag, options } = ctx;
    await ctx.communicate(output.byteLength, () => {
      if (native?.supports('allgather', dtype)) return native.allgather(output, counts);
      if (allgatherRunsHierarchically(ctx.hierarchicalAllgather, hierarchy, options)) {
        return hierarchicalAllgather(hierarchy, output, counts, tag, options);
      }
      return allgather(ctx.transport, output, counts, tag, options);
    });
    const gathered = [firstDims.reduce((a, b) => a + b, 0), ...shape.slice(1)];
    return [entry.output ? { shape: gathered } : { output, shape: gathered }];
  },
};

/** Every rank that passed option 'out' must have passed the gathered size. */
function checkOuts(name: string, requests: readonly AllgatherRequest[], firstDims: readonly number[]): Refusal | undefined {
  const rowSize = elementCount((requests[0] as AllgatherRequest).shape.slice(1));
  const total = firstDims.reduce((a, b) => a + b, 0) * rowSize;
  for (const [rank, request] of requests.entries()) {
    if (request.outLength === undefined || request.outLength === total) continue;
    return {
      errorKind: 'InvalidArgumentError',
      message:
        `Wrong 'out' for allgather of tensor '${name}': rank ${rank}'s has ${request.outLength} elements, ` +
        `the result has ${total} (first dimensions ${shapeText(firstDims)} × ${rowSize} elements per row).`,
    };
  }
  return undefined;
}
