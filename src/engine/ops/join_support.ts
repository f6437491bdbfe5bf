/**
 * What the specs share to let ranks that have joined (ops/join.ts) take part as neutral
 * contributors: buffers full of the reduce op's identity, and averages over the ranks that
 * contributed.
 */
import { allocShared, reduceIdentity } from '../../core/dtypes.js';
import { elementCount } from '../../core/shapes.js';
import type { AllreduceOp, ReduceOp, TypedArray, WireDType } from '../../core/types.js';
import type { Agreement, Refusal } from './op_spec.js';
import type { ScaleFactors } from './scaling.js';

/** Shared memory of `shape` holding `op`'s identity on `dtype`. */
export function identityBuffer(dtype: WireDType, shape: readonly number[], op: ReduceOp): TypedArray {
  const buffer = allocShared(dtype, elementCount(shape));
  buffer.fill(reduceIdentity(op, dtype) as never);
  return buffer;
}

/**
 * A reduction with joined ranks: 'average' divides by the ranks that contributed, not by all, so
 * it runs as a sum whose postscale carries the division.
 */
export function overContributors<R extends { reduceOp: AllreduceOp } & ScaleFactors>(
  request: R,
  agreement: Agreement<R>,
  size: number,
): R {
  const joined = agreement.joined?.length ?? 0;
  if (joined === 0 || request.reduceOp !== 'average') return request;
  return { ...request, reduceOp: 'sum', postscale: (request.postscale ?? 1) / (size - joined) };
}

/** A rooted collective cannot take its data from a rank that has joined. */
export function joinedRoot(op: string, name: string, root: number, joined: readonly number[]): Refusal | undefined {
  if (!joined.includes(root)) return undefined;
  return {
    errorKind: 'InvalidArgumentError',
    message: `${op} of tensor '${name}' has root ${root}, which has joined (it has no data to give).`,
  };
}
