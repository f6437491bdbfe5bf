/**
 * Scatter: the root's tensor split along the first dimension, rank r getting piece r as
 * { data, shape }; only the root passes a tensor. Every root, every dtype, uneven and zero-row
 * splits, the default split (the first rows % N ranks one row more), a 1-D tensor, mismatches,
 * argument errors, the Sync twin.
 *
 * Large: one case of 2^20 + 3 float64 elements, not every dtype.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { InvalidArgumentError, MismatchError } from '../../../src/core/errors.js';
import type { DType, Splits } from '../../../src/core/types.js';
import { evenSplits, offsetsOf, referenceInput, rowSlice } from '../../helpers/reference.js';
import { kLargeCount } from './allreduce.js';
import { type ConformanceCase, check, checkArray, checkJson, checkRefused, part, settleAll } from './case.js';
import { mismatch } from './negotiation.js';

/**
 * One scatter of the root's reference input of `splits` rows (null on the other ranks): checks
 * this rank's piece (its class, shape and values) and, on the root, that its tensor is untouched.
 * `splits` undefined: the default split, of `rows` rows.
 */
async function scatterOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  spec: {
    dtype: DType;
    root: number;
    rows: number;
    rowLength: number;
    splits?: number[];
    /** The form the root passes 'splits' in (default the array itself). */
    splitsAs?: (counts: number[]) => Splits;
    shaped: boolean;
    name: string;
  },
): Promise<void> {
  const { dtype, root, rows, rowLength, splits, splitsAs = (counts) => counts, shaped, name } = spec;
  await part(name, async () => {
    const reference = referenceInput(dtype, root, rows * rowLength, 'sum');
    const mine = rank === root ? reference.slice() : undefined;
    const tensor = mine === undefined ? null : shaped ? { data: mine, shape: [rows, rowLength] } : mine;
    const pieces = splits ?? evenSplits(rows, size);
    const myRows = pieces[rank] as number;
    // Odd ranks receive into their own 'out' (the MPI addon's scatterv writes there directly).
    const out = rank % 2 === 1 ? allocShared(dtype, myRows * rowLength) : undefined;
    const result = await rr.scatter(tensor, {
      name,
      root,
      ...(splits && rank === root ? { splits: splitsAs(splits) } : {}),
      ...(out ? { out } : {}),
    });
    if (out) check(result.data === out, `${name}: option 'out'`, 'the result is not the given out');
    checkJson(result.shape, shaped ? [myRows, rowLength] : [myRows], `${name}: the shape`);
    checkArray(dtype, result.data, rowSlice(reference, offsetsOf(pieces)[rank] as number, myRows, rowLength), name);
    if (mine) checkArray(dtype, mine, reference, `${name}: the input was modified`);
  });
}

const everyRoot: ConformanceCase = {
  name: 'scatter: from every root, every dtype; uneven splits (arrays and integer typed arrays) with zero rows, the default split, a 1-D tensor',
  async run(rr, rank, size) {
    for (let root = 0; root < size; root++) {
      // Rank r gets (2r + root) % 3 rows: some none.
      const splits = Array.from({ length: size }, (_, r) => (2 * r + root) % 3);
      const splitRows = splits.reduce((a, b) => a + b, 0);
      await settleAll(
        kDTypes.flatMap((dtype, i) => [
          scatterOnce(rr, rank, size, {
            dtype,
            root,
            rows: splitRows,
            rowLength: 3,
            splits,
            // Every other dtype: the splits as an integer typed array (Horovod passes an int32 tensor).
            ...(i % 2 === 1 ? { splitsAs: (counts: number[]) => (i % 4 === 1 ? Int32Array : Uint16Array).from(counts) } : {}),
            shaped: true,
            name: `scatter/${dtype}/root ${root}/splits`,
          }),
          scatterOnce(rr, rank, size, {
            dtype,
            root,
            rows: 2 * size + 1,
            rowLength: 2,
            shaped: true,
            name: `scatter/${dtype}/root ${root}/default`,
          }),
          scatterOnce(rr, rank, size, {
            dtype,
            root,
            rows: size + 2,
            rowLength: 1,
            shaped: false,
            name: `scatter/${dtype}/root ${root}/1-D`,
          }),
        ]),
      );
    }
  },
};

const large: ConformanceCase = {
  name: 'scatter: 2^20 + 3 float64 elements from the last rank, the default split',
  async run(rr, rank, size) {
    await scatterOnce(rr, rank, size, {
      dtype: 'float64',
      root: size - 1,
      rows: kLargeCount,
      rowLength: 1,
      shaped: false,
      name: 'scatter/large',
    });
  },
};

const refused: ConformanceCase = {
  name: "scatter: argument errors at the call (a tensor on a non-root, none on the root, 'splits' wrong or not the root's), no rank waits",
  async run(rr, rank, size) {
    const root = 0;
    const tensor = { data: new Uint16Array(2 * size), shape: [size, 2] };
    if (rank === root) {
      await checkRefused('no tensor on the root', `scatter: the root (rank ${root}) must pass the tensor to split`, () =>
        rr.scatter(null, { name: 'scatter-arg', root }),
      );
      await checkRefused(
        "'splits' of size + 1 ranks",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got ${JSON.stringify([size, ...new Array(size).fill(0)])}`,
        () => rr.scatter(tensor, { name: 'scatter-arg', root, splits: [size, ...new Array(size).fill(0)] }),
      );
      await checkRefused(
        "'splits' adding up to a row less",
        `option 'splits' adds up to ${size - 1} rows but the tensor has ${size}`,
        () => rr.scatter(tensor, { name: 'scatter-arg', root, splits: [size - 1, ...new Array(size - 1).fill(0)] }),
      );
    }
    if (rank === size - 1 && rank !== root) {
      await checkRefused(
        'a tensor on a non-root',
        `scatter: only the root (rank ${root}) passes a tensor; rank ${rank} must pass null and receives its rows`,
        () => rr.scatter(tensor, { name: 'scatter-arg', root }),
      );
      await checkRefused("'splits' on a non-root", `scatter: option 'splits' is the root's (rank ${root}) only`, () =>
        rr.scatter(null, { name: 'scatter-arg', root, splits: new Array(size).fill(1) }),
      );
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const values = Uint16Array.from({ length: 2 * size }, (_, i) => i);
    const result = await rr.scatter(rank === root ? { data: values, shape: [size, 2] } : null, { name: 'scatter-arg', root });
    checkJson(result.shape, [1, 2], 'the call after the refused ones: the shape');
    checkJson([...result.data], [2 * rank, 2 * rank + 1], 'the call after the refused ones');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'scatter roots',
    MismatchError,
    (size) => `Mismatched scatter roots for tensor 'mm/scatter-root': rank 0 has root 0, rank ${size - 1} has root 1.`,
    (rr, odd, rank, size) => {
      const root = odd ? 1 : 0;
      return rr.scatter(rank === root ? new Float32Array(size) : null, { name: 'mm/scatter-root', root });
    },
  ),
  mismatch(
    "scatter 'out' lengths",
    InvalidArgumentError,
    (size) =>
      `Wrong 'out' for scatter of tensor 'mm/scatter-out': rank ${size - 1}'s is float32 of 1 elements, ` +
      `its rows are float32 of 2 (1 × 2).`,
    (rr, odd, rank, size) => {
      // One row of 2 elements for each rank from root 0; the last rank's 'out' is an element short.
      const out = new Float32Array(new SharedArrayBuffer(4 * (odd ? 1 : 2)));
      return rr.scatter(rank === 0 ? { data: new Float32Array(2 * size), shape: [size, 2] } : null, {
        name: 'mm/scatter-out',
        out,
      });
    },
  ),
  mismatch(
    "scatter 'out' dtype",
    InvalidArgumentError,
    (size) =>
      `Wrong 'out' for scatter of tensor 'mm/scatter-out-dtype': rank ${size - 1}'s is int32 of 2 elements, ` +
      `its rows are float32 of 2 (1 × 2).`,
    (rr, odd, rank, size) => {
      const out = odd ? new Int32Array(new SharedArrayBuffer(8)) : new Float32Array(new SharedArrayBuffer(8));
      return rr.scatter(rank === 0 ? { data: new Float32Array(2 * size), shape: [size, 2] } : null, {
        name: 'mm/scatter-out-dtype',
        out,
      });
    },
  ),
];

const sync: ConformanceCase = {
  name: 'scatterSync: uneven splits from the last rank',
  needsSync: true,
  async run(rr, rank, size) {
    const root = size - 1;
    const splits = Array.from({ length: size }, (_, r) => r % 3);
    const rows = splits.reduce((a, b) => a + b, 0);
    const reference = referenceInput('int8', root, rows * 2, 'sum');
    const result = rr.scatterSync(rank === root ? { data: reference.slice(), shape: [rows, 2] } : null, {
      name: 'scatter-sync',
      root,
      ...(rank === root ? { splits } : {}),
    });
    check(result.data instanceof Int8Array, 'the data', `is a ${result.data.constructor.name}`);
    checkJson(result.shape, [splits[rank], 2], 'the shape');
    checkArray(
      'int8',
      result.data,
      rowSlice(reference, offsetsOf(splits)[rank] as number, splits[rank] as number, 2),
      'the values',
    );
  },
};

export const scatterCases: readonly ConformanceCase[] = [everyRoot, large, refused, ...mismatches, sync];
