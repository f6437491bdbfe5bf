/**
 * allreduce: the element-wise reduction of every rank's tensor, on every rank, or their Adasum
 * (op 'adasum', algorithms/adasum.ts). Ranks agree on dtype, reduce op and shape. Cached, fused
 * (consecutive allreduces of one dtype and op run over one packed buffer, fusion.ts; Adasum keeps
 * each tensor's coefficients its own), and eager when tiny (its data rides with the ready round;
 * not Adasum, which runs on the flat tree of ranks only).
 */
import { adasumAllreduce } from '../../algorithms/adasum.js';
import { allreduce } from '../../algorithms/allreduce.js';
import { allreduceRunsHierarchically, hierarchicalAllreduce } from '../../algorithms/hierarchical_allreduce.js';
import { allreduceRunsThroughHubs, hubAllreduce } from '../../algorithms/hub_allreduce.js';
import { reduceInRankOrder } from '../../algorithms/rank_order_reduce.js';
import { bytesPerElement, constructorOf } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import { type AllreduceOp, kAllreduceOps, type ReduceOp, type TypedArray } from '../../core/types.js';

import { codeOf } from '../wire/wire.js';
import { type FieldCheck, firstMismatch, kDTypeCheck, kShapeCheck } from './agreement.js';
import { identityBuffer, overContributors } from './join_support.js';
import {
  type ExecutionContext,
  type ExecutionResult,
  fitsEagerly,
  type OpEntry,
  type OpSpec,
  type RequestBase,
} from './op_spec.js';
import { pack, unpack } from './packing.js';
import { isScaled, kScalesCheck, readScales, type ScaleFactors, scale, writeScales } from './scaling.js';

export interface AllreduceRequest extends RequestBase<'allreduce'>, ScaleFactors {
  reduceOp: AllreduceOp;
}

const kReduceOpCheck: FieldCheck<AllreduceRequest> = { what: 'reduce ops', text: (r) => r.reduceOp };

export const allreduceOp: OpSpec<AllreduceRequest> = {
  op: 'allreduce',
  write(w, r) {
    w.u8(codeOf(kAllreduceOps, r.reduceOp));
    writeScales(w, r);
  },
  read: (r, base) => ({ ...base, reduceOp: r.enumOf(kAllreduceOps, 'reduce op'), ...readScales(r) }),
  agree: (name, requests) =>
    firstMismatch(name, requests, [kDTypeCheck, kReduceOpCheck, kScalesCheck, kShapeCheck]) ?? {
      request: requests[0] as AllreduceRequest,
      counts: [],
    },
  cacheable: true,
  fusionKey: (r) => `${r.dtype}/${r.reduceOp}/${r.prescale ?? 1}/${r.postscale ?? 1}`,
  eager: {
    // Scaled ones take the algorithms: the peers' buffers arrive unscaled. A forced allreduce
    // (RINGREDUCE_ALGORITHMS) runs at every size, these included, as asked.
    fits: (r, size, forced) =>
      forced?.allreduce === undefined &&
      r.reduceOp !== 'adasum' &&
      !isScaled(r) &&
      fitsEagerly(elementCount(r.shape) * bytesPerElement(r.dtype), size),
    finish: (r, buffers, into, kernels, firstIsScratch) =>
      reduceInRankOrder(buffers, into, elementwise(r.reduceOp), kernels, firstIsScratch),
  },
  joined: {
    adjust: (_name, agreement) => agreement,
    // Zeros for adasum: a zero vector leaves its partner as it is.
    standIn: ({ request }) => ({
      request,
      buffer: identityBuffer(request.dtype, request.shape, elementwise(request.reduceOp, 'sum')),
    }),
  },
  async execute(ctx, agreement, entries) {
    const request = overContributors(agreement.request, agreement, ctx.transport.size);
    const first = entries[0] as OpEntry<AllreduceRequest>;
    if (entries.length > 1) await fusedAllreduce(ctx, request, entries);
    else if (first.buffer) await allreduceBuffer(ctx, request, first.buffer, [first.buffer.length]);
    // The results are in the entries' own memory: nothing to hand back.
    return kNoResults;
  },
};

const kNoResults: readonly ExecutionResult[] = Object.freeze([]);

/** `counts`: the lengths of the tensors packed in `buf`, which adasum combines each on its own. */
async function allreduceBuffer(
  ctx: ExecutionContext,
  request: AllreduceRequest,
  buf: TypedArray,
  counts: readonly number[],
): Promise<void> {
  const { native, hierarchy, tag, options } = ctx;
  const op = request.reduceOp;
  scale(buf, request.prescale);
  await ctx.communicate(buf.byteLength, () => {
    if (op === 'adasum') return adasumAllreduce(ctx.transport, buf, tag, options, counts);
    if (native?.supports('allreduce', request.dtype, op)) return native.allreduce(buf, op);
    if (allreduceRunsThroughHubs(ctx.hierarchicalAllreduce, ctx.hubs, buf.byteLength, options)) {
      return hubAllreduce(ctx.hubs, buf, op, tag, options);
    }
    if (allreduceRunsHierarchically(ctx.hierarchicalAllreduce, hierarchy, buf.byteLength, options)) {
      return hierarchicalAllreduce(hierarchy, buf, op, tag, options);
    }
    return allreduce(ctx.transport, buf, op, tag, options);
  });
  scale(buf, request.postscale);
}

/**
 * A tensor from this size up is reduced in its own memory when the backend takes several buffers
 * in one submission (NativeCollectives.allreduceEach): copying it into the fusion buffer and back
 * costs more than the call of its own it saves. Smaller ones are packed together.
 */
export const kOwnMemoryMinBytes = 64 * 1024;

/**
 * Several tensors as one: packed into pooled memory, reduced once, copied back; or, on a backend
 * that reduces several buffers in one submission, the large ones each in their own memory and
 * the small ones packed, all in one call.
 */
async function fusedAllreduce(ctx: ExecutionContext, request: AllreduceRequest, entries: readonly OpEntry<AllreduceRequest>[]) {
  const parts = entries.map((e) => e.buffer as TypedArray);
  const { native } = ctx;
  const each = native?.allreduceEach;
  const op = request.reduceOp;
  if (each && op !== 'adasum' && native.supports('allreduce', request.dtype, op)) {
    const { packed, own } = splitByOwnMemory(parts, kOwnMemoryMinBytes);
    if (own.length > 0) {
      await withPacked(ctx, request, packed, async (fused) => {
        const segments = fused ? [fused, ...own] : own;
        for (const segment of segments) scale(segment, request.prescale);
        const bytes = segments.reduce((n, segment) => n + segment.byteLength, 0);
        await ctx.communicate(bytes, () => each.call(native, segments, op));
        for (const segment of segments) scale(segment, request.postscale);
      });
      return;
    }
  }
  await withPacked(ctx, request, parts, (fused) =>
    allreduceBuffer(
      ctx,
      request,
      fused as TypedArray,
      parts.map((p) => p.length),
    ),
  );
}

/**
 * The tensors reduced in their own memory (from `minBytes` up, in order), and those to pack; a
 * lone small tensor needs no packing, so it goes with the others.
 */
export function splitByOwnMemory(
  parts: readonly TypedArray[],
  minBytes: number,
): { packed: readonly TypedArray[]; own: readonly TypedArray[] } {
  const small = parts.filter((p) => p.byteLength < minBytes);
  if (small.length === 1) return { packed: [], own: parts };
  return { packed: small, own: parts.filter((p) => p.byteLength >= minBytes) };
}

/** Runs `body` with `parts` packed into pooled memory (undefined when there are none), then copies the results back. */
async function withPacked(
  ctx: ExecutionContext,
  request: AllreduceRequest,
  parts: readonly TypedArray[],
  body: (fused: TypedArray | undefined) => Promise<void>,
): Promise<void> {
  if (parts.length === 0) return body(undefined);
  const elements = parts.reduce((n, p) => n + p.length, 0);
  const buffer = ctx.pool.acquire(elements * bytesPerElement(request.dtype));
  try {
    const fused = new (constructorOf(request.dtype))(buffer, 0, elements);
    const detail = { tensors: parts.length, bytes: fused.byteLength };
    ctx.local('FUSION_COPY', detail, () => pack(parts, fused));
    await body(fused);
    ctx.local('FUSION_COPY', detail, () => unpack(fused, parts));
  } finally {
    // allreduce settles only once nothing is in flight: the buffer is quiet here.
    ctx.pool.release(buffer);
  }
}

/** The element-wise op of a request that is not adasum (eager exchange, joined ranks' stand-ins). */
function elementwise(op: AllreduceOp, forAdasum?: ReduceOp): ReduceOp {
  if (op !== 'adasum') return op;
  if (forAdasum === undefined) throw new Error('adasum has no element-wise form');
  return forAdasum;
}
