/** Shape arithmetic that the caller's thread and the engine share. */

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * `rows` split over `size` ranks as evenly as possible, the first rows % size ranks one row more
 * (reducescatter's and scatter's default split, the algorithms' chunking: algorithms/segments.ts).
 */
export function splitRows(rows: number, size: number): number[] {
  const base = Math.floor(rows / size);
  const extra = rows % size;
  return Array.from({ length: size }, (_, r) => (r < extra ? base + 1 : base));
}

/** Whether `n` is 1, 2, 4, 8, ... (adasum's rank counts). */
export function isPowerOfTwo(n: number): boolean {
  return Number.isSafeInteger(n) && n > 0 && (n & (n - 1)) === 0;
}
