/**
 * scatter: the root's tensor split along the first dimension, rank r getting splits[r] rows
 * (binomial tree, or MPI's Scatterv). Only the root passes a tensor: the others learn its dtype,
 * shape and splits from the agreement, whose ruling request is the root's, and get their rows in
 * memory allocated then, or in their option 'out', whose dtype and length rank 0 checks against
 * the root's tensor and that rank's rows (a non-root's request then carries the out's dtype), so
 * that a wrong one fails on every rank alike. Ranks agree on the root. Since a non-root's own
 * request holds none of that, it is never cached.
 */
import { treeScatter } from '../../algorithms/tree_scatter.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { readCounts, withOutLength, writeCounts, writeOutLength } from '../wire/wire.js';
import { firstMismatch, rootCheck } from './agreement.js';
import type { OpEntry, OpSpec, Refusal, RequestBase } from './op_spec.js';

export interface ScatterRequest extends RequestBase<'scatter'> {
  root: number;
  /** The root's only: rows for each rank, in rank order ([] on the other ranks). */
  splits: number[];
  /** With option 'out' only: its length in elements (rank 0 checks it against this rank's rows). */
  outLength?: number;
}

export const scatterOp: OpSpec<ScatterRequest> = {
  op: 'scatter',
  write(w, r) {
    w.i32(r.root);
    writeCounts(w, r.splits);
    writeOutLength(w, r.outLength);
  },
  read: (r, base) => withOutLength(r, { ...base, root: r.i32('root'), splits: readCounts(r, 'splits') }),
  agree(name, requests) {
    const refusal = firstMismatch(name, requests, [rootCheck('scatter')]);
    if (refusal) return refusal;
    const root = requests[(requests[0] as ScatterRequest).root];
    if (root === undefined || root.splits.length !== requests.length) {
      return {
        errorKind: 'InvalidArgumentError',
        message: `scatter of tensor '${name}': the root's request has no splits for ${requests.length} ranks.`,
      };
    }
    return checkOuts(name, requests, root) ?? { request: root, counts: [] };
  },
  cacheable: false,
  async execute(ctx, { request: root }, entries) {
    const entry = entries[0] as OpEntry<ScatterRequest>;
    const input = entry.buffer;
    const { rank } = ctx.transport;
    const rowSize = elementCount(root.shape.slice(1));
    const counts = root.splits.map((rows) => rows * rowSize);
    const rows = root.splits[rank] ?? 0;
    const output = entry.output ?? allocShared(root.dtype, rows * rowSize);
    const { native } = ctx;
    const bytes = output.byteLength;
    if (native?.scatter && native.supports('scatter', root.dtype)) {
      const nativeScatter = native.scatter.bind(native);
      await ctx.communicate(bytes, () => nativeScatter(input, output, counts, root.root));
    } else {
      await ctx.communicate(bytes, () => treeScatter(ctx.transport, input, output, counts, root.root, ctx.tag, ctx.options));
    }
    const shape = [rows, ...root.shape.slice(1)];
    return [entry.output ? { shape } : { output, shape }];
  },
};

/** Every rank that passed option 'out' must have passed the root's dtype and its rows' length. */
function checkOuts(name: string, requests: readonly ScatterRequest[], root: ScatterRequest): Refusal | undefined {
  const rowSize = elementCount(root.shape.slice(1));
  for (const [rank, request] of requests.entries()) {
    if (request.outLength === undefined) continue;
    const length = (root.splits[rank] ?? 0) * rowSize;
    if (request.dtype === root.dtype && request.outLength === length) continue;
    return {
      errorKind: 'InvalidArgumentError',
      message:
        `Wrong 'out' for scatter of tensor '${name}': rank ${rank}'s is ${request.dtype} of ${request.outLength} elements, ` +
        `its rows are ${root.dtype} of ${length} (${root.splits[rank] ?? 0} × ${rowSize}).`,
    };
  }
  return undefined;
}
