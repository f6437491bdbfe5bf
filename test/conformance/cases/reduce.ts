/**
 * Reduce: the root gets the element-wise reduction of every rank's tensor, the others null.
 * Every dtype and op at counts 0, 1, N-1, N, N+1 and 1000 (the root going round the ranks),
 * every root with option 'out', in place and { data, shape }, mismatches, argument errors, the
 * Sync twin.
 *
 * Large counts (2^20 + 3 elements) for a subset only, to keep the conformance tier in its time
 * budget: float32 sum, int64 bor (in place), uint8 product, each to another root.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { MismatchError } from '../../../src/core/errors.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';
import { referenceAllreduce, referenceInput } from '../../helpers/reference.js';
import { kLargeCount } from './allreduce.js';
import {
  type ConformanceCase,
  check,
  checkArray,
  checkJson,
  checkRefused,
  edgeCounts,
  kCombos,
  part,
  settleAll,
} from './case.js';
import { mismatch } from './negotiation.js';

type Variant = 'fresh' | 'out' | 'in place' | 'shaped';

/**
 * One reduce of every rank's reference input to `root`. The root passes, per `variant`, nothing
 * more, an 'out' of its own, the tensor itself as 'out' (shared memory), or { data, shape }; it
 * checks the result, the others that they got null. Every rank checks its input untouched
 * (except the root's in place, which is the result).
 */
async function reduceOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  spec: { dtype: DType; op: ReduceOp; count: number; root: number; variant?: Variant },
): Promise<void> {
  const { dtype, op, count, root, variant = 'fresh' } = spec;
  const name = `reduce/${dtype}/${op}/${count}/root ${root}/${variant}`;
  await part(name, async () => {
    const reference = referenceInput(dtype, rank, count, op);
    const isRoot = rank === root;
    const inPlace = isRoot && variant === 'in place';
    // In place, the tensor must be shared memory (it is the 'out').
    const mine = inPlace ? allocShared(dtype, count) : reference.slice();
    if (inPlace) mine.set(reference as never);
    const out = inPlace ? mine : isRoot && variant === 'out' ? allocShared(dtype, count) : undefined;
    const options = out ? { name, root, op, out } : { name, root, op };
    const expected = referenceAllreduce(dtype, op, count, size);
    if (variant === 'shaped') {
      const result = await rr.reduce({ data: mine, shape: [1, count] }, options);
      if (!isRoot) check(result === null, name, 'a non-root got a result');
      else {
        check(result !== null, name, 'the root got null');
        checkJson(result?.shape, [1, count], `${name}: the shape`);
        checkArray(dtype, result?.data as TypedArray, expected, name);
      }
    } else {
      const result = await rr.reduce(mine, options);
      if (!isRoot) check(result === null, name, 'a non-root got a result');
      else {
        check(result !== null, name, 'the root got null');
        if (out) check(result === out, `${name}: option 'out'`, 'the result is not the given out');
        checkArray(dtype, result as TypedArray, expected, name);
      }
    }
    if (!inPlace) checkArray(dtype, mine, reference, `${name}: the input was modified`);
  });
}

const smallCounts: ConformanceCase = {
  name: 'reduce: every dtype and op, counts 0, 1, N-1, N, N+1, 1000, the root going round the ranks, all in flight at once',
  async run(rr, rank, size) {
    const counts = edgeCounts(size);
    await settleAll(
      counts.flatMap((count, c) =>
        kCombos.map(({ dtype, op }, i) => reduceOnce(rr, rank, size, { dtype, op, count, root: (c + i) % size })),
      ),
    );
  },
};

const everyRoot: ConformanceCase = {
  name: "reduce: to every root, every dtype, 1001 elements; the root passes 'out', the tensor itself as 'out', or { data, shape }",
  async run(rr, rank, size) {
    for (let root = 0; root < size; root++) {
      await settleAll(
        kDTypes.flatMap((dtype) =>
          (['fresh', 'out', 'in place', 'shaped'] as const).map((variant) =>
            reduceOnce(rr, rank, size, { dtype, op: dtype.startsWith('float') ? 'sum' : 'bxor', count: 1001, root, variant }),
          ),
        ),
      );
    }
  },
};

const largeCounts: ConformanceCase = {
  name: 'reduce: 2^20 + 3 elements (float32 sum to the last rank, int64 bor in place to rank 0, uint8 product to rank 1)',
  async run(rr, rank, size) {
    await reduceOnce(rr, rank, size, { dtype: 'float32', op: 'sum', count: kLargeCount, root: size - 1 });
    await reduceOnce(rr, rank, size, { dtype: 'int64', op: 'bor', count: kLargeCount, root: 0, variant: 'in place' });
    await reduceOnce(rr, rank, size, { dtype: 'uint8', op: 'product', count: kLargeCount, root: 1 % size, variant: 'out' });
  },
};

const refused: ConformanceCase = {
  name: "reduce: argument errors at the call (bitwise op on floats, a root out of range, a wrong 'out'), no rank waits",
  async run(rr, rank, size) {
    if (rank === size - 1) {
      await checkRefused(
        'bitwise op on float64',
        "option 'op' is 'bxor' but the tensor is float64: bitwise ops need an integer dtype",
        () => rr.reduce(new Float64Array(3), { name: 'reduce-arg', op: 'bxor' }),
      );
      await checkRefused('a root out of range', `option 'root' must be an integer rank in [0, ${size - 1}], got ${size}`, () =>
        rr.reduce(new Float64Array(3), { name: 'reduce-arg', root: size }),
      );
      await checkRefused("an 'out' of another length", "option 'out' has 4 elements but the tensor has 3", () =>
        rr.reduce(new Float64Array(3), { name: 'reduce-arg', root: rank, out: allocShared('float64', 4) as Float64Array }),
      );
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const result = await rr.reduce(new Float64Array([rank, 1, 2]), { name: 'reduce-arg', root: size - 1, op: 'max' });
    if (rank === size - 1) checkJson(result === null ? null : [...result], [size - 1, 1, 2], 'the call after the refused ones');
    else check(result === null, 'the call after the refused ones', 'a non-root got a result');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'reduce roots',
    MismatchError,
    (size) => `Mismatched reduce roots for tensor 'mm/reduce-root': rank 0 has root 0, rank ${size - 1} has root 1.`,
    (rr, odd) => rr.reduce(new Float32Array(3), { name: 'mm/reduce-root', root: odd ? 1 : 0 }),
  ),
];

const sync: ConformanceCase = {
  name: "reduceSync: int32 sum to the last rank, which passes 'out'",
  needsSync: true,
  async run(rr, rank, size) {
    const root = size - 1;
    const out = rank === root ? (allocShared('int32', 2) as Int32Array) : undefined;
    const result = rr.reduceSync(
      new Int32Array([rank, 5]),
      out ? { name: 'reduce-sync', root, out } : { name: 'reduce-sync', root },
    );
    if (rank !== root) {
      check(result === null, 'a non-root', 'got a result');
      return;
    }
    check(result === out, "option 'out'", 'the result is not the given out');
    checkJson([...(result as Int32Array)], [(size * (size - 1)) / 2, 5 * size], 'the values');
  },
};

export const reduceCases: readonly ConformanceCase[] = [smallCounts, everyRoot, largeCounts, refused, ...mismatches, sync];
