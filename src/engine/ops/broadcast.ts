/**
 * broadcast: every rank gets the root's tensor. Ranks agree on dtype, root and shape; every rank
 * passes a tensor of that shape, whose values only the root's matter. Cached; never fused.
 */
import { broadcast } from '../../algorithms/broadcast.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { firstMismatch, kDTypeCheck, kShapeCheck, rootCheck } from './agreement.js';
import { joinedRoot } from './join_support.js';
import type { OpEntry, OpSpec, RequestBase } from './op_spec.js';

export interface BroadcastRequest extends RequestBase<'broadcast'> {
  root: number;
}

export const broadcastOp: OpSpec<BroadcastRequest> = {
  op: 'broadcast',
  write: (w, r) => w.i32(r.root),
  read: (r, base) => ({ ...base, root: r.i32('root') }),
  agree: (name, requests) =>
    firstMismatch(name, requests, [kDTypeCheck, rootCheck('broadcast'), kShapeCheck]) ?? {
      request: requests[0] as BroadcastRequest,
      counts: [],
    },
  cacheable: true,
  joined: {
    adjust: (name, agreement, joined) => joinedRoot('broadcast', name, agreement.request.root, joined) ?? agreement,
    // It receives the root's data like any rank, and drops it.
    standIn: ({ request }) => ({ request, buffer: allocShared(request.dtype, elementCount(request.shape)) }),
  },
  async execute(ctx, { request }, entries) {
    const buffer = (entries[0] as OpEntry<BroadcastRequest>).buffer;
    if (!buffer) return [{}];
    const { native } = ctx;
    await ctx.communicate(buffer.byteLength, () =>
      native?.supports('broadcast', request.dtype)
        ? native.broadcast(buffer, request.root)
        : broadcast(ctx.transport, buffer, request.root, ctx.tag, ctx.options),
    );
    return [{}];
  },
};
