/**
 * Helpers shared by the algorithm tests that run real in-thread ranks over the memory transport.
 */
import { constructorOf, isFloat } from '../../../src/core/dtypes.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';
import type { Transport } from '../../../src/transport/transport.js';
import { randomArray, seeded } from './typed_data.js';

/** Runs `call` on every rank and waits for all of them, so that no failure leaves a rank running. */
export async function onEveryRank<T>(
  transports: readonly Transport[],
  call: (t: Transport, rank: number) => Promise<T>,
): Promise<T[]> {
  const results = await Promise.allSettled(transports.map((t, rank) => call(t, rank)));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** A buffer full of a byte pattern no correct result has, to catch regions never written. */
export function garbage(dtype: DType, length: number): TypedArray {
  const out = new (constructorOf(dtype))(length);
  new Uint8Array(out.buffer).fill(0xa5);
  return out;
}

/** Small integers (or ±0.5, 1, 2 for products) in floats: every sum and product of a few is exact in any order. */
export function exactInputs(dtype: DType, op: ReduceOp, length: number, seed: number): TypedArray {
  const random = seeded(seed);
  if (!isFloat(dtype)) return randomArray(dtype, length, random);
  const out = new (constructorOf(dtype))(length) as Float32Array | Float64Array;
  const choices = op === 'product' ? [-2, -1, -0.5, 0.5, 1, 2] : [-3, -2, -1, 0, 1, 2, 3, 0.5, 1.5];
  for (let i = 0; i < length; i++) out[i] = choices[random() % choices.length] as number;
  return out;
}
