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

/** Whether `out` is what `op` of every rank's makeInput gives (allgather: blocks of `perRank`). */
export function checkOutput(op: BenchOp, out: TypedArray, size: number, perRank: number, root: number, dtype: DType): boolean {
  const wrap = new (constructorOf(dtype))(1);
  const expect = (value: number): number => {
    put(wrap, 0, value);
    return get(wrap, 0);
  };
  const sumFactor = (size * (size + 1)) / 2;
  for (let i = 0; i < out.length; i++) {
    let want: number;
    if (op === 'allreduce') want = expect(sumFactor * (1 + (i % kPeriod)));
    else if (op === 'broadcast') want = expect((root + 1) * (1 + (i % kPeriod)));
    else {
      const r = Math.floor(i / perRank);
      want = expect((r + 1) * (1 + ((i - r * perRank) % kPeriod)));
    }
    if (get(out, i) !== want) return false;
  }
  return true;
}
