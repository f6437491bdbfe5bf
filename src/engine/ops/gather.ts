/**
 * gather: the root gets every rank's tensor concatenated along the first dimension, in rank
 * order (binomial tree, or MPI's Gatherv); the first dimension may differ per rank, so the
 * agreement carries them all and it is never cached. Ranks agree on dtype, root and the
 * dimensions after the first. The root's output is allocated once the sizes are known, unless
 * it passed 'out', whose length rank 0 checks so that a wrong one fails on every rank alike.
 */
import { treeGather } from '../../algorithms/tree_gather.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { withOutLength, writeOutLength } from '../wire/wire.js';
import { firstMismatch, kDTypeCheck, kNdimCheck, rootCheck, shapeText, trailingDimsCheck } from './agreement.js';
import { joinedRoot } from './join_support.js';
import type { OpEntry, OpSpec, Refusal, RequestBase } from './op_spec.js';

export interface GatherRequest extends RequestBase<'gather'> {
  root: number;
  /** The root's option 'out' only: its length in elements. */
  outLength?: number;
}

export const gatherOp: OpSpec<GatherRequest> = {
  op: 'gather',
  write(w, r) {
    w.i32(r.root);
    writeOutLength(w, r.outLength);
  },
  read: (r, base) => withOutLength(r, { ...base, root: r.i32('root') }),
  agree(name, requests) {
    const refusal = firstMismatch(name, requests, [kDTypeCheck, rootCheck('gather'), kNdimCheck, trailingDimsCheck('gather')]);
    if (refusal) return refusal;
    const firstDims = requests.map((r) => r.shape[0] ?? 0);
    return checkRootOut(name, requests, firstDims) ?? { request: requests[0] as GatherRequest, counts: firstDims };
  },
  cacheable: false,
  joined: {
    // A joined rank gives zero rows; a joined root has nowhere to gather to.
    adjust: (name, agreement, joined) =>
      joinedRoot('gather', name, agreement.request.root, joined) ?? {
        ...agreement,
        counts: agreement.counts.map((rows, r) => (joined.includes(r) ? 0 : rows)),
      },
    standIn: ({ request }) => ({
      request: { ...request, shape: [0, ...request.shape.slice(1)] },
      buffer: allocShared(request.dtype, 0),
    }),
  },
  async execute(ctx, { request: agreed, counts: firstDims }, entries) {
    const entry = entries[0] as OpEntry<GatherRequest>;
    const { shape, dtype } = entry.request;
    const input = entry.buffer;
    if (!input) throw new Error(`gather '${agreed.name}' reached the executor without its input`);
    const rowSize = elementCount(shape.slice(1));
    const counts = firstDims.map((rows) => rows * rowSize);
    const isRoot = ctx.transport.rank === agreed.root;
    const total = counts.reduce((a, b) => a + b, 0);
    const output = isRoot ? (entry.output ?? allocShared(dtype, total)) : undefined;
    if (output) {
      let offset = 0;
      for (let r = 0; r < ctx.transport.rank; r++) offset += counts[r] ?? 0;
      output.set(input as never, offset);
    }
    const { native } = ctx;
    if (native?.gather && native.supports('gather', dtype)) {
      const nativeGather = native.gather.bind(native);
      await ctx.communicate(input.byteLength, () => nativeGather(input, output, counts, agreed.root));
    } else {
      await ctx.communicate(input.byteLength, () =>
        treeGather(ctx.transport, input, output, counts, agreed.root, ctx.tag, ctx.options),
      );
    }
    if (!output) return [{}];
    const gathered = [firstDims.reduce((a, b) => a + b, 0), ...shape.slice(1)];
    return [entry.output ? { shape: gathered } : { output, shape: gathered }];
  },
};

/** The root's option 'out', when given, must be exactly as long as the gathered result. */
function checkRootOut(name: string, requests: readonly GatherRequest[], firstDims: readonly number[]): Refusal | undefined {
  const root = (requests[0] as GatherRequest).root;
  const outLength = requests[root]?.outLength;
  const rowSize = elementCount((requests[0] as GatherRequest).shape.slice(1));
  const total = firstDims.reduce((a, b) => a + b, 0) * rowSize;
  if (outLength === undefined || outLength === total) return undefined;
  return {
    errorKind: 'InvalidArgumentError',
    message:
      `Wrong 'out' for gather of tensor '${name}': root ${root}'s has ${outLength} elements, ` +
      `the result has ${total} (first dimensions ${shapeText(firstDims)} × ${rowSize} elements per row).`,
  };
}
