/**
 * Alltoall: rank i sends splits_i[j] rows (first dimension) to rank j and receives, in rank
 * order, the rows every rank sends it. Uneven and zero-row splits (a rank that sends nothing, a
 * rank that receives nothing), the default even split, the kind of the result, option 'out'
 * (even ranks), mismatches (a wrong 'out' among them), argument errors, the Sync twin.
 *
 * Large: one case of 2^20 + 3 elements per rank (float32 and int64, uneven splits), not every dtype.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { InvalidArgumentError, MismatchError } from '../../../src/core/errors.js';
import type { DType, Splits, TypedArray } from '../../../src/core/types.js';
import { evenSplits, expectedAlltoall, referenceInput } from '../../helpers/reference.js';
import { kLargeCount } from './allreduce.js';
import { type ConformanceCase, check, checkArray, checkJson, checkRefused, part, settleAll } from './case.js';
import { mismatch } from './negotiation.js';

/** A splits pattern: rows rank `from` sends rank `to` in a job of `size`. */
type Pattern = (from: number, to: number, size: number) => number;

/** Uneven, some zero: 0 to 2 rows. */
const uneven: Pattern = (from, to) => (from + 2 * to) % 3;
/** Rank 0 sends nothing, and no rank sends the last rank anything; 1 to 3 rows otherwise. */
const withEmpty: Pattern = (from, to, size) => (from === 0 || to === size - 1 ? 0 : ((from + to) % 3) + 1);

function splitsOf(pattern: Pattern, size: number): number[][] {
  return Array.from({ length: size }, (_, from) => Array.from({ length: size }, (_, to) => pattern(from, to, size)));
}

/**
 * One alltoall of every rank's reference input ({ data, shape: [rows, rowLength] }) with the
 * pattern's splits; checks the output's kind, shape and values, receivedSplits and the input.
 * Even ranks receive into their own 'out' (the MPI addon's alltoallv writes there directly).
 */
async function alltoallOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  dtype: DType,
  pattern: Pattern,
  rowLength: number,
  name: string,
  splitsAs: (counts: number[]) => Splits = (counts) => counts,
): Promise<void> {
  await part(name, async () => {
    const splits = splitsOf(pattern, size);
    const inputs = splits.map((s, r) => referenceInput(dtype, r, s.reduce((a, b) => a + b, 0) * rowLength, 'sum'));
    const reference = inputs[rank] as TypedArray;
    const mine = reference.slice();
    const rows = mine.length / rowLength;
    const received = splits.map((s) => s[rank] as number);
    const out = rank % 2 === 0 ? allocShared(dtype, received.reduce((a, b) => a + b, 0) * rowLength) : undefined;
    const { output, receivedSplits } = await rr.alltoall(
      { data: mine, shape: [rows, rowLength] },
      { name, splits: splitsAs(splits[rank] as number[]), ...(out ? { out } : {}) },
    );
    if (out) check(output.data === out, `${name}: option 'out'`, 'the result is not the given out');
    checkJson(output.shape, [received.reduce((a, b) => a + b, 0), rowLength], `${name}: the shape`);
    checkArray(dtype, output.data, expectedAlltoall(dtype, inputs, splits, rowLength, rank), name);
    checkArray(dtype, mine, reference, `${name}: the input was modified`);
    checkJson(receivedSplits, received, `${name}: receivedSplits`);
  });
}

/** The forms option 'splits' takes: an array, or an integer typed array of any width (Horovod passes an int32 tensor). */
const kSplitsKinds: readonly ((counts: number[]) => Splits)[] = [
  (counts) => counts,
  (counts) => Int32Array.from(counts),
  (counts) => Uint8Array.from(counts),
  (counts) => BigInt64Array.from(counts, BigInt),
  (counts) => Uint32Array.from(counts),
];

const splitsCases: ConformanceCase = {
  name: 'alltoall: uneven splits (arrays and integer typed arrays) with zero rows, a rank sending nothing, a rank receiving nothing; every dtype, in flight at once',
  async run(rr, rank, size) {
    await settleAll(
      kDTypes.flatMap((dtype, i) => [
        alltoallOnce(rr, rank, size, dtype, uneven, 4, `a2a/${dtype}/uneven`, kSplitsKinds[i % kSplitsKinds.length]),
        alltoallOnce(rr, rank, size, dtype, withEmpty, 1, `a2a/${dtype}/empty`),
      ]),
    );
  },
};

const evenDefault: ConformanceCase = {
  name: 'alltoall: the default even split, a typed array in gives the same class out; 0 rows',
  async run(rr, rank, size) {
    const perRank = 3;
    const inputOf = (r: number) => Uint32Array.from({ length: perRank * size }, (_, i) => r * 1000 + i);
    const mine = inputOf(rank);
    const { output, receivedSplits } = await rr.alltoall(mine, { name: 'a2a/even' });
    check(output instanceof Uint32Array, 'the output', `is a ${output.constructor.name}`);
    const expected = Array.from({ length: size }, (_, from) => [...inputOf(from).subarray(rank * perRank, (rank + 1) * perRank)]);
    checkJson([...output], expected.flat(), 'the values');
    checkJson([...mine], [...inputOf(rank)], 'the input was modified');

    const empty = await rr.alltoall({ data: new Float64Array(0), shape: [0, 7] }, { name: 'a2a/even-empty' });
    checkJson(empty.output.shape, [0, 7], 'no rows: the shape');
    check(empty.output.data instanceof Float64Array, 'no rows: the data', `is a ${empty.output.data.constructor.name}`);
    // Last: the values above are checked whatever receivedSplits says.
    checkJson(receivedSplits, new Array(size).fill(perRank), 'receivedSplits');
    checkJson(empty.receivedSplits, new Array(size).fill(0), 'no rows: receivedSplits');
  },
};

const large: ConformanceCase = {
  name: 'alltoall: 2^20 + 3 elements per rank, uneven splits (float32, int64)',
  async run(rr, rank, size) {
    const split = evenSplits(kLargeCount, size);
    // Rank i sends rank j the ((i + j) % size)-th piece of an even split: every rank's splits add up to kLargeCount.
    const pattern: Pattern = (from, to) => split[(from + to) % size] as number;
    for (const dtype of ['float32', 'int64'] as const)
      await alltoallOnce(rr, rank, size, dtype, pattern, 1, `a2a-large/${dtype}`);
  },
};

const refused: ConformanceCase = {
  name: "alltoall: argument errors at the call ('splits' of the wrong length, sum or kind, a default split that does not divide), no rank waits",
  async run(rr, rank, size) {
    if (rank === size - 1) {
      const tensor = { data: new Int8Array(2 * size), shape: [size, 2] };
      const short = new Array(size + 1).fill(0);
      short[0] = size;
      await checkRefused(
        "'splits' of size + 1 ranks",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got ${JSON.stringify(short)}`,
        () => rr.alltoall(tensor, { name: 'a2a-arg', splits: short }),
      );
      const over = new Array(size).fill(1);
      over[0] = 2;
      await checkRefused(
        "'splits' adding up to a row more",
        `option 'splits' adds up to ${size + 1} rows but the tensor has ${size}`,
        () => rr.alltoall(tensor, { name: 'a2a-arg', splits: over }),
      );
      await checkRefused(
        "'splits' with a negative count",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got ${JSON.stringify([-1, ...new Array(size - 1).fill(1)])}`,
        () => rr.alltoall(tensor, { name: 'a2a-arg', splits: [-1, ...new Array(size - 1).fill(1)] }),
      );
      const negative = Int32Array.from({ length: size }, (_, i) => (i === 0 ? 2 : 1));
      negative[size - 1] = -1;
      await checkRefused(
        "'splits' as an Int32Array with a negative count",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got Int32Array [${[...negative].join(', ')}]`,
        () => rr.alltoall(tensor, { name: 'a2a-arg', splits: negative }),
      );
      const floats = new Float32Array(size).fill(1);
      await checkRefused(
        "'splits' as a Float32Array",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got Float32Array [${[...floats].join(', ')}]`,
        () => rr.alltoall(tensor, { name: 'a2a-arg', splits: floats as unknown as Splits }),
      );
      if (size > 1) {
        await checkRefused(
          'a default split that does not divide',
          `alltoall without option 'splits' splits the first dimension evenly, but ${size + 1} rows do not divide by ${size} ranks`,
          () => rr.alltoall({ data: new Int8Array(2 * size + 2), shape: [size + 1, 2] }, { name: 'a2a-arg' }),
        );
      }
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const { output } = await rr.alltoall(new Int8Array(size).fill(rank), { name: 'a2a-arg' });
    checkJson([...output], [...Array(size).keys()], 'the call after the refused ones');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'alltoall trailing dimensions',
    MismatchError,
    (size) =>
      `Mismatched alltoall dimensions after the first for tensor 'mm/a2a-dims': rank 0 has [4], rank ${size - 1} has [5].`,
    (rr, odd, _rank, size) => {
      const rowLength = odd ? 5 : 4;
      return rr.alltoall({ data: new Float32Array(size * rowLength), shape: [size, rowLength] }, { name: 'mm/a2a-dims' });
    },
  ),
  mismatch(
    'alltoall data types',
    MismatchError,
    (size) => `Mismatched data types for tensor 'mm/a2a-dtype': rank 0 has int16, rank ${size - 1} has uint16.`,
    (rr, odd, _rank, size) => rr.alltoall(odd ? new Uint16Array(size) : new Int16Array(size), { name: 'mm/a2a-dtype' }),
  ),
  mismatch(
    "alltoall 'out' lengths",
    InvalidArgumentError,
    (size) =>
      `Wrong 'out' for alltoall of tensor 'mm/a2a-out': rank ${size - 1}'s has ${3 * size - 3} elements, ` +
      `it receives ${3 * size} (rows [${new Array(size).fill(1).join(', ')}] × 3 elements per row).`,
    (rr, odd, _rank, size) => {
      // One row of 3 elements to each rank; the last rank's 'out' is a row short.
      const out = new Float32Array(new SharedArrayBuffer(4 * (odd ? 3 * size - 3 : 3 * size)));
      return rr.alltoall({ data: new Float32Array(3 * size), shape: [size, 3] }, { name: 'mm/a2a-out', out });
    },
  ),
];

const sync: ConformanceCase = {
  name: 'alltoallSync: uneven splits with zero rows',
  needsSync: true,
  async run(rr, rank, size) {
    const splits = splitsOf(uneven, size);
    const inputs = splits.map((s, r) => referenceInput('float64', r, s.reduce((a, b) => a + b, 0) * 2, 'sum'));
    const mine = (inputs[rank] as TypedArray).slice() as Float64Array;
    const { output, receivedSplits } = rr.alltoallSync(
      { data: mine, shape: [mine.length / 2, 2] },
      { name: 'a2a-sync', splits: splits[rank] as number[] },
    );
    checkJson(
      receivedSplits,
      splits.map((s) => s[rank]),
      'receivedSplits',
    );
    checkArray('float64', output.data, expectedAlltoall('float64', inputs, splits, 2, rank), 'the values');
  },
};

export const alltoallCases: readonly ConformanceCase[] = [splitsCases, evenDefault, large, refused, ...mismatches, sync];
