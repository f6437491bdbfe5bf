/**
 * reducescatter: the element-wise reduction over ranks, split along the first dimension: rank r
 * gets rows [start_r, start_r + count_r), counts as even as possible with the first dim0 % N ranks
 * one row more (splitRows), or the caller's `splits` (torch's reduce_scatter into outputs of
 * uneven sizes, Horovod's reducescatter with splits). Ranks agree on dtype, reduce op, scale
 * factors, shape and splits. Cached; never fused. The caller's side copies the input into work
 * space (`buffer`) and hands the output (`output`, its own rows) along, since its size follows
 * from the shape and the splits alone.
 */
import { reducescatter } from '../../algorithms/reducescatter.js';
import { allocShared } from '../../core/dtypes.js';
import { elementCount, splitRows } from '../../core/shapes.js';
import { kReduceOps, type ReduceOp } from '../../core/types.js';
import { codeOf, readCounts, writeCounts } from '../wire/wire.js';
import { type FieldCheck, firstMismatch, kDTypeCheck, kShapeCheck, shapeText } from './agreement.js';
import { identityBuffer, overContributors } from './join_support.js';
import type { OpEntry, OpSpec, RequestBase } from './op_spec.js';
import { kScalesCheck, readScales, type ScaleFactors, scale, writeScales } from './scaling.js';

export interface ReducescatterRequest extends RequestBase<'reducescatter'>, ScaleFactors {
  reduceOp: ReduceOp;
  /** Rows of the result for each rank, in rank order, adding up to the first dimension; unset: the even split. */
  splits?: number[];
}

const kReduceOpCheck: FieldCheck<ReducescatterRequest> = { what: 'reduce ops', text: (r) => r.reduceOp };
const kSplitsCheck: FieldCheck<ReducescatterRequest> = {
  what: 'reducescatter splits',
  text: (r) => (r.splits ? shapeText(r.splits) : 'the even split'),
};

/** Rows of the result for each of `size` ranks: the request's splits, or the even split. */
function rowsPerRank(request: ReducescatterRequest, size: number): number[] {
  return request.splits ?? splitRows(request.shape[0] ?? 0, size);
}

export const reducescatterOp: OpSpec<ReducescatterRequest> = {
  op: 'reducescatter',
  write(w, r) {
    w.u8(codeOf(kReduceOps, r.reduceOp));
    writeScales(w, r);
    // No splits travel as none: a job has at least one rank, so real splits are never empty.
    writeCounts(w, r.splits ?? []);
  },
  read(r, base) {
    const request: ReducescatterRequest = { ...base, reduceOp: r.enumOf(kReduceOps, 'reduce op'), ...readScales(r) };
    const splits = readCounts(r, 'splits');
    if (splits.length > 0) request.splits = splits;
    return request;
  },
  agree: (name, requests) =>
    firstMismatch(name, requests, [kDTypeCheck, kReduceOpCheck, kScalesCheck, kShapeCheck, kSplitsCheck]) ?? {
      request: requests[0] as ReducescatterRequest,
      counts: [],
    },
  cacheable: true,
  joined: {
    adjust: (_name, agreement) => agreement,
    standIn: ({ request }) => ({ request, buffer: identityBuffer(request.dtype, request.shape, request.reduceOp) }),
  },
  async execute(ctx, agreement, entries) {
    const request = overContributors(agreement.request, agreement, ctx.transport.size);
    const entry = entries[0] as OpEntry<ReducescatterRequest>;
    const input = entry.buffer;
    if (!input) throw new Error(`reducescatter '${request.name}' reached the executor without its input`);
    const { rank, size } = ctx.transport;
    const rowSize = elementCount(request.shape.slice(1));
    const counts = rowsPerRank(request, size).map((rows) => rows * rowSize);
    // A joined rank's stand-in has no output of its own: its rows are computed and dropped.
    const output = entry.output ?? allocShared(request.dtype, counts[rank] ?? 0);
    scale(input, request.prescale);
    const offset = counts.slice(0, rank).reduce((a, b) => a + b, 0);
    // In place (the caller's out is its own rows of the tensor): the algorithms leave them there.
    const inPlace = output.buffer === input.buffer && output.byteOffset === input.byteOffset + offset * input.BYTES_PER_ELEMENT;
    const { native } = ctx;
    if (inPlace) {
      await ctx.communicate(input.byteLength, () =>
        reducescatter(ctx.transport, input, counts, request.reduceOp, ctx.tag, ctx.options),
      );
    } else if (native?.reducescatter && native.supports('reducescatter', request.dtype, request.reduceOp)) {
      const nativeReducescatter = native.reducescatter.bind(native);
      await ctx.communicate(input.byteLength, () => nativeReducescatter(input, output, counts, request.reduceOp));
    } else {
      // The ring writes this rank's rows straight into `output`; `input` is only work space.
      await ctx.communicate(input.byteLength, () =>
        reducescatter(ctx.transport, input, counts, request.reduceOp, ctx.tag, ctx.options, output),
      );
    }
    scale(output, request.postscale);
    return [{}];
  },
};
