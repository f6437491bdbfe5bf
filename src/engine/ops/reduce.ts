/**
 * reduce: the root gets the element-wise reduction of every rank's tensor (binomial tree, or MPI's
 * own); the other ranks' buffers are work space and they get nothing back. Ranks agree on dtype,
 * reduce op, root and shape. Cached; never fused.
 */
import { reduceToRoot } from '../../algorithms/reduce_to_root.js';
import { kReduceOps, type ReduceOp } from '../../core/types.js';
import { codeOf } from '../wire/wire.js';
import { type FieldCheck, firstMismatch, kDTypeCheck, kShapeCheck, rootCheck } from './agreement.js';
import { identityBuffer, joinedRoot, overContributors } from './join_support.js';
import type { OpEntry, OpSpec, RequestBase } from './op_spec.js';

export interface ReduceRequest extends RequestBase<'reduce'> {
  reduceOp: ReduceOp;
  root: number;
}

const kReduceOpCheck: FieldCheck<ReduceRequest> = { what: 'reduce ops', text: (r) => r.reduceOp };

export const reduceOp: OpSpec<ReduceRequest> = {
  op: 'reduce',
  write(w, r) {
    w.u8(codeOf(kReduceOps, r.reduceOp));
    w.i32(r.root);
  },
  read: (r, base) => ({ ...base, reduceOp: r.enumOf(kReduceOps, 'reduce op'), root: r.i32('root') }),
  agree: (name, requests) =>
    firstMismatch(name, requests, [kDTypeCheck, kReduceOpCheck, rootCheck('reduce'), kShapeCheck]) ?? {
      request: requests[0] as ReduceRequest,
      counts: [],
    },
  cacheable: true,
  joined: {
    adjust: (name, agreement, joined) => joinedRoot('reduce', name, agreement.request.root, joined) ?? agreement,
    standIn: ({ request }) => ({ request, buffer: identityBuffer(request.dtype, request.shape, request.reduceOp) }),
  },
  async execute(ctx, agreement, entries) {
    const request = overContributors(agreement.request, agreement, ctx.transport.size);
    const buffer = (entries[0] as OpEntry<ReduceRequest>).buffer;
    if (!buffer) return [{}];
    const { native } = ctx;
    if (native?.reduce && native.supports('reduce', request.dtype, request.reduceOp)) {
      const nativeReduce = native.reduce.bind(native);
      await ctx.communicate(buffer.byteLength, () => nativeReduce(buffer, request.reduceOp, request.root));
    } else {
      await ctx.communicate(buffer.byteLength, () =>
        reduceToRoot(ctx.transport, buffer, request.reduceOp, request.root, ctx.tag, ctx.options),
      );
    }
    return [{}];
  },
};
