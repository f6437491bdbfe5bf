/**
 * scatter: the root's tensor split along the first dimension, rank r getting splits[r] rows
 * (binomial tree, or MPI's Scatterv). Only the root passes a tensor: the others learn its dtype,
 * shape and splits from the agreement, whose ruling request is the root's, and get their rows in
 * memory allocated then. Ranks agree on the root. Since a non-root's own request holds none of
 * that, it is never cached.
 */
import { treeScatter } from '../../algorithms/tree_scatter.js';
import { allocShared } from '../../core/dtypes.js';
import { readCounts, writeCounts } from '../wire.js';
import { elementCount, firstMismatch, rootCheck } from './agreement.js';
import type { OpEntry, OpSpec, RequestBase } from './op_spec.js';

export interface ScatterRequest extends RequestBase<'scatter'> {
  root: number;
  /** The root's only: rows for each rank, in rank order ([] on the other ranks). */
  splits: number[];
}

export const scatterOp: OpSpec<ScatterRequest> = {
  op: 'scatter',
  write(w, r) {
    w.i32(r.root);
    writeCounts(w, r.splits);
  },
  read: (r, base) => ({ ...base, root: r.i32('root'), splits: readCounts(r, 'splits') }),
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
    return { request: root, counts: [] };
  },
  cacheable: false,
  async execute(ctx, { request: root }, entries) {
    const input = (entries[0] as OpEntry<ScatterRequest>).buffer;
    const { rank } = ctx.transport;
    const rowSize = elementCount(root.shape.slice(1));
    const counts = root.splits.map((rows) => rows * rowSize);
    const rows = root.splits[rank] ?? 0;
    const output = allocShared(root.dtype, rows * rowSize);
    const { native } = ctx;
    const bytes = output.byteLength;
    if (native?.scatter && native.supports('scatter', root.dtype)) {
      const nativeScatter = native.scatter.bind(native);
      await ctx.communicate(bytes, () => nativeScatter(input, output, counts, root.root));
    } else {
      await ctx.communicate(bytes, () => treeScatter(ctx.transport, input, output, counts, root.root, ctx.tag, ctx.options));
    }
    return [{ output, shape: [rows, ...root.shape.slice(1)] }];
  },
};
