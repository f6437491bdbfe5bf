/**
 * Which slice of a data set a rank trains on. Pure arithmetic, shared by the array, tensor and
 * tf.data helpers of shard.ts.
 *
 * Synchronous data-parallel training needs every rank to run the same number of steps: a rank
 * that runs one step more waits forever in its gradient allreduce. So by default every rank
 * gets exactly floor(length / size) items and the remainder is dropped. With dropRemainder
 * false, every item is kept and the first (length % size) ranks get one more; the ranks then
 * need join (JoinCallback in model.fit) for the steps the others do not make.
 */
import { InvalidArgumentError } from '../../index.js';

export interface ShardSpec {
  rank: number;
  size: number;
  /** Give every rank the same count, dropping up to size−1 items (default true); false: the first (length % size) ranks get one more. */
  dropRemainder?: boolean;
}

/**
 * The contiguous range [start, end) of `length` items that `rank` owns.
 *
 * @example
 * shardRange(10, { rank: 2, size: 3 }); // { start: 6, end: 9 }: item 9 is dropped
 */
export function shardRange(length: number, spec: ShardSpec): { start: number; end: number } {
  const { rank, size } = checkSpec(spec);
  if (!Number.isSafeInteger(length) || length < 0)
    throw new InvalidArgumentError(`length must be a non-negative integer, got ${length}`);
  const base = Math.floor(length / size);
  if (spec.dropRemainder ?? true) return { start: rank * base, end: (rank + 1) * base };
  const extra = length % size;
  const start = rank * base + Math.min(rank, extra);
  return { start, end: start + base + (rank < extra ? 1 : 0) };
}

export function checkSpec(spec: ShardSpec): { rank: number; size: number } {
  const { rank, size } = spec;
  if (!Number.isSafeInteger(size) || size < 1) throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= size)
    throw new InvalidArgumentError(`rank must be an integer in [0, ${size}), got ${rank}`);
  return { rank, size };
}
