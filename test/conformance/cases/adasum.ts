/**
 * Adasum (allreduce's op 'adasum'): float32 and float64 tensors of several lengths give the
 * pairwise tree's result (test/helpers/adasum_reference.ts) on every rank where the job's size
 * is a power of two, and are refused with a message naming the sizes that work elsewhere; the
 * Sync twin agrees; integer tensors are refused; a rank passing 'sum' where the others pass
 * 'adasum' fails the call on every rank with the same MismatchError.
 */
import { MismatchError } from '../../../src/core/errors.js';
import { adasumReference } from '../../helpers/adasum_reference.js';
import { type ConformanceCase, check, checkRefused, part, settleAll } from './case.js';
import { mismatch } from './negotiation.js';

const kLengths = [0, 1, 5, 1000] as const;

function isPowerOfTwo(size: number): boolean {
  return (size & (size - 1)) === 0;
}

/** Rank `rank`'s input: a deterministic vector every rank can build (no two ranks parallel). */
function inputOf(rank: number, length: number): Float64Array {
  return Float64Array.from({ length }, (_, i) => Math.sin(rank * 7.1 + i * 0.37) + (i % (rank + 2)) * 0.25);
}

function checkClose(got: ArrayLike<number>, want: Float64Array, tolerance: number, what: string): void {
  check(got.length === want.length, what, `length ${got.length}, not ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const error = Math.abs((got[i] as number) - (want[i] as number));
    check(error <= tolerance * (1 + Math.abs(want[i] as number)), what, `[${i}] is ${got[i]}, not ${want[i]}`);
  }
}

const kMismatch = mismatch(
  'adasum against sum',
  MismatchError,
  (size) => `Mismatched reduce ops for tensor 'mm/adasum': rank 0 has adasum, rank ${size - 1} has sum.`,
  (rr, odd) => rr.allreduce(new Float32Array(4), { name: 'mm/adasum', op: odd ? 'sum' : 'adasum' }),
);

const refusedFor = (size: number) =>
  `option 'op' is 'adasum' but the job (or process set) has ${size} ranks: adasum runs on 1, 2, 4, 8, ... ranks (a power of two)`;

export const adasumCases: readonly ConformanceCase[] = [
  {
    name: 'allreduce adasum: float32 and float64, every length, the pairwise tree (or refused off powers of two)',
    async run(rr, rank, size) {
      if (!isPowerOfTwo(size)) {
        await checkRefused('adasum off a power of two', refusedFor(size), () =>
          rr.allreduce(new Float32Array(4), { name: 'adasum/refused', op: 'adasum' }),
        );
        return;
      }
      const calls: Promise<void>[] = [];
      for (const dtype of ['float32', 'float64'] as const) {
        for (const length of kLengths) {
          const what = `${dtype}, ${length} elements`;
          const inputs = Array.from({ length: size }, (_, r) => inputOf(r, length));
          const mine = dtype === 'float32' ? Float32Array.from(inputs[rank] as Float64Array) : (inputs[rank] as Float64Array);
          // The reference from the inputs as the ranks hold them (float32 rounds them first).
          const held = dtype === 'float32' ? inputs.map((v) => Float32Array.from(v)) : inputs;
          const want = adasumReference(held);
          calls.push(
            part(what, async () => {
              const got = await rr.allreduce(mine, { name: `adasum/${dtype}/${length}`, op: 'adasum' });
              checkClose(got, want, dtype === 'float32' ? 1e-5 : 1e-12, what);
            }),
          );
        }
      }
      await settleAll(calls);
    },
  },
  {
    name: 'allreduceSync adasum: the same result as the call',
    needsSync: true,
    async run(rr, rank, size) {
      if (!isPowerOfTwo(size)) return;
      const inputs = Array.from({ length: size }, (_, r) => inputOf(r, 33));
      const got = rr.allreduceSync(inputs[rank] as Float64Array, { name: 'adasum/sync', op: 'adasum' });
      checkClose(got, adasumReference(inputs), 1e-12, 'allreduceSync');
    },
  },
  {
    name: 'allreduce adasum: integer tensors are refused',
    async run(rr) {
      await checkRefused(
        'an int32 tensor',
        "option 'op' is 'adasum' but the tensor is int32: adasum needs float32 or float64",
        () => rr.allreduce(new Int32Array(3), { name: 'adasum/int', op: 'adasum' }),
      );
    },
  },
  {
    ...kMismatch,
    // Off powers of two the adasum side is refused at the call: the sum side would wait alone.
    run: (rr, rank, size) => (isPowerOfTwo(size) ? kMismatch.run(rr, rank, size) : Promise.resolve()),
  },
];
