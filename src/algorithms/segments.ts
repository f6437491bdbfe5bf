/**
 * Chunk arithmetic shared by the algorithms.
 *
 * How it works: `count` elements split into `parts` chunks get sizes that differ by at most one,
 * the first `count % parts` chunks being one larger, so chunk i starts at
 * i * floor(count / parts) + min(i, count % parts). Every rank computes the same split from the
 * same inputs, which is what lets a receiver know the exact length of each message. A chunk is
 * cut again into segments of a fixed length (the last one shorter) to pipeline the transfer.
 */
import { InvalidArgumentError } from '../core/errors.js';

/** A division of a buffer into consecutive blocks, one per rank. */
export interface Blocks {
  readonly offsets: readonly number[];
  readonly lengths: readonly number[];
}

function checkSplit(count: number, parts: number): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new InvalidArgumentError(`count must be a non-negative integer, got ${count}`);
  }
  if (!Number.isSafeInteger(parts) || parts < 1) {
    throw new InvalidArgumentError(`parts must be a positive integer, got ${parts}`);
  }
}

/** Length of chunk `index` when `count` elements are split into `parts` chunks. */
export function chunkLength(count: number, parts: number, index: number): number {
  checkSplit(count, parts);
  const base = Math.floor(count / parts);
  return index < count % parts ? base + 1 : base;
}

/** Offset of chunk `index` when `count` elements are split into `parts` chunks. */
export function chunkOffset(count: number, parts: number, index: number): number {
  checkSplit(count, parts);
  return index * Math.floor(count / parts) + Math.min(index, count % parts);
}

/** The `parts` chunks of `count` elements. */
export function evenBlocks(count: number, parts: number): Blocks {
  checkSplit(count, parts);
  const offsets: number[] = [];
  const lengths: number[] = [];
  for (let i = 0; i < parts; i++) {
    offsets.push(chunkOffset(count, parts, i));
    lengths.push(chunkLength(count, parts, i));
  }
  return { offsets, lengths };
}

/** Consecutive blocks of the given lengths (allgather: one block per rank, possibly empty). */
export function blocksFromCounts(counts: readonly number[]): Blocks {
  const offsets: number[] = [];
  let offset = 0;
  for (const [rank, count] of counts.entries()) {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new InvalidArgumentError(`counts[${rank}] must be a non-negative integer, got ${count}`);
    }
    offsets.push(offset);
    offset += count;
  }
  return { offsets, lengths: [...counts] };
}

/** Number of segments of at most `size` elements in a chunk of `length` (0 for an empty chunk). */
export function segmentCount(length: number, size: number): number {
  if (!Number.isSafeInteger(size) || size < 1) {
    throw new InvalidArgumentError(`segment size must be a positive integer, got ${size}`);
  }
  return Math.ceil(length / size);
}

/** Length of segment `index` of a chunk of `length` cut into segments of `size` (0 past the end). */
export function segmentLength(length: number, size: number, index: number): number {
  return Math.max(0, Math.min(size, length - index * size));
}
