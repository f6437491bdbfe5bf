/**
 * Input patterns whose collective results are exact in every dtype (small integers), so a rank
 * can check its output element by element.
 */
import { constructorOf } from '../src/core/dtypes.js';
import type { DType, TypedArray } from '../src/core/types.js';
import type { BenchOp } from './spec.js';

const kPeriod = 7;

function put(array: TypedArray, i: number, value: number): void {
  (array as unknown as (number | bigint)[])[i] = isBigIntArray(array) ? BigInt(value) : value;
}
function get(array: TypedArray, i: number): number {
  return Number((array as unknown as (number | bigint)[])[i]);
}
function isBigIntArray(array: TypedArray): boolean {
  return array instanceof BigInt64Array || array instanceof BigUint64Array;
}

/** Rank r's input: (r + 1) · (1 + i mod 7). */
export function makeInput(dtype: DType, count: number, rank: number): TypedArray {
  const array = new (constructorOf(dtype))(count);
  for (let i = 0; i < count; i++) put(array, i, (rank + 1) * (1 + (i % kPeriod)));
  return array;
}

/**
 * Where a rank stands in a row: `count` elements in the row (the nccl-tests size, spec.ts),
 * `perRank` = count / N for the ops that split it (allgather, reducescatter, alltoall, gather,
 * scatter), the root of the rooted ops.
 */
export interface RowLayout {
  size: number;
  rank: number;
  count: number;
  perRank: number;
  root: number;
}

/**
 * What `op` over every rank's makeInput gives this rank: the result's length and element i, or
 * null where the rank gets nothing (reduce and gather off the root). The scatter root's input
 * is makeInput(count, root); every other op's is makeInput of the rank's own input length.
 */
export function expectedResult(op: BenchOp, l: RowLayout): { length: number; value: (i: number) => number } | null {
  const sumFactor = (l.size * (l.size + 1)) / 2;
  const pattern = (i: number) => 1 + (i % kPeriod);
  /** Rank order blocks of perRank, block r being rank r's input. */
  const blocks = (i: number) => {
    const r = Math.floor(i / l.perRank);
    return (r + 1) * pattern(i - r * l.perRank);
  };
  const mine = l.rank * l.perRank;
  switch (op) {
    case 'allreduce':
      return { length: l.count, value: (i) => sumFactor * pattern(i) };
    case 'broadcast':
      return { length: l.count, value: (i) => (l.root + 1) * pattern(i) };
    case 'allgather':
      return { length: l.count, value: blocks };
    case 'reducescatter':
      return { length: l.perRank, value: (i) => sumFactor * pattern(mine + i) };
    case 'alltoall':
      // Block s comes from rank s: the part of its send buffer meant for this rank.
      return {
        length: l.count,
        value: (i) => {
          const s = Math.floor(i / l.perRank);
          return (s + 1) * pattern(mine + i - s * l.perRank);
        },
      };
    case 'reduce':
      return l.rank === l.root ? { length: l.count, value: (i) => sumFactor * pattern(i) } : null;
    case 'gather':
      return l.rank === l.root ? { length: l.count, value: blocks } : null;
    case 'scatter':
      return { length: l.perRank, value: (i) => (l.root + 1) * pattern(mine + i) };
  }
}

/** Whether `out` (null: nothing came back) is exactly what expectedResult says, in `dtype`'s arithmetic. */
export function checkOutput(op: BenchOp, out: TypedArray | null, layout: RowLayout, dtype: DType): boolean {
  const want = expectedResult(op, layout);
  if (want === null || out === null) return want === null && out === null;
  if (out.length !== want.length) return false;
  const wrap = new (constructorOf(dtype))(1);
  const expect = (value: number): number => {
    put(wrap, 0, value);
    return get(wrap, 0);
  };
  for (let i = 0; i < out.length; i++) if (get(out, i) !== expect(want.value(i))) return false;
  return true;
}
