/**
 * The reduction of an all-to-all allreduce (every rank holds every rank's buffer, as after the
 * engine's eager exchange of small tensors): ((b0 op b1) op b2) ... in rank order. Every rank
 * folds the same operands in the same order, so every rank gets the same bits, floats included
 * (the element-wise ops are commutative, so only the association order matters).
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import { elementwiseOf, finishOf, type KernelSelector, reduceDType } from './reduce.js';

/**
 * Writes the reduction of `buffers` (one per rank, in rank order, same length and dtype) into
 * `into`. `firstIsScratch`: the caller gives up `buffers[0]`, which may then hold the running
 * result instead of a fresh copy.
 */
export function reduceInRankOrder(
  buffers: readonly TypedArray[],
  into: TypedArray,
  op: ReduceOp,
  kernels: KernelSelector,
  firstIsScratch = false,
): void {
  const dtype = reduceDType(into, op);
  const kernel = kernels(dtype, elementwiseOf(op));
  const first = buffers[0] as TypedArray;
  // `into` may be one of the operands (this rank's own buffer): fold into a copy unless it is the first.
  const acc = first === into || firstIsScratch ? first : (first.slice() as TypedArray);
  for (let r = 1; r < buffers.length; r++) kernel(acc, 0, buffers[r] as TypedArray, 0, acc.length);
  finishOf(op, buffers.length)?.(acc, 0, acc.length);
  if (acc !== into) into.set(acc as never);
}
