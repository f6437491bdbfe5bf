/**
 * Reducescatter: the element-wise reduction over ranks, split along the first dimension (rank r
 * gets rows [start_r, start_r + count_r), the first dim0 % N ranks one row more; a 1-D array
 * splits its elements alike). Every dtype and op at counts 0, 1, N-1, N, N+1 and 1000; 2-D
 * tensors with option 'out'; explicit splits; prescale/postscale; mismatches; argument errors;
 * the Sync twin.
 *
 * Large counts (2^20 + 3 elements) for a subset only, to keep the conformance tier in its time
 * budget: float32 sum, float64 average (postscaled), int32 sum, int64 bxor. Every dtype and op
 * meets the large count in the allreduce cases, over the same kernels.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { MismatchError } from '../../../src/core/errors.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';
import { evenSplits, offsetsOf, referenceAllreduce, referenceInput, referenceScaledAllreduce } from '../../helpers/reference.js';
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
  rowsOf,
  settleAll,
} from './case.js';
import { mismatch } from './negotiation.js';

interface Scales {
  prescale?: number;
  postscale?: number;
}

/** This rank's rows of the (scaled) allreduce of every rank's reference input of `rows` × `rowLength`. */
function expectedPart(
  dtype: DType,
  op: ReduceOp,
  rows: number,
  rowLength: number,
  rank: number,
  size: number,
  scales: Scales = {},
): TypedArray {
  const count = rows * rowLength;
  const whole =
    scales.prescale === undefined && scales.postscale === undefined
      ? referenceAllreduce(dtype, op, count, size)
      : referenceScaledAllreduce(dtype, op, count, size, scales.prescale ?? 1, scales.postscale ?? 1);
  const splits = evenSplits(rows, size);
  return rowsOf(whole, offsetsOf(splits)[rank] as number, splits[rank] as number, rowLength);
}

/** One 1-D reducescatter of every rank's reference input; checks the result's class and values, and the input untouched. */
async function reducescatterOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  dtype: DType,
  op: ReduceOp,
  count: number,
  scales: Scales = {},
): Promise<void> {
  const scaled = scales.prescale !== undefined || scales.postscale !== undefined;
  const name = `rs/${dtype}/${op}/${count}${scaled ? `/x${scales.prescale ?? 1}/x${scales.postscale ?? 1}` : ''}`;
  await part(name, async () => {
    const reference = referenceInput(dtype, rank, count, op);
    const mine = reference.slice();
    const result = await rr.reducescatter(mine, { name, op, ...scales });
    checkArray(dtype, result, expectedPart(dtype, op, count, 1, rank, size, scales), name);
    checkArray(dtype, mine, reference, `${name}: the input was modified`);
  });
}

const smallCounts: ConformanceCase = {
  name: 'reducescatter: every dtype and op, 1-D, counts 0, 1, N-1, N, N+1, 1000, all in flight at once',
  async run(rr, rank, size) {
    const counts = edgeCounts(size);
    await settleAll(
      counts.flatMap((count) => kCombos.map(({ dtype, op }) => reducescatterOnce(rr, rank, size, dtype, op, count))),
    );
  },
};

const kLargeSubset: ReadonlyArray<{ dtype: DType; op: ReduceOp; scales?: Scales }> = [
  { dtype: 'float32', op: 'sum' },
  { dtype: 'float64', op: 'average', scales: { postscale: 2 } },
  { dtype: 'int32', op: 'sum' },
  { dtype: 'int64', op: 'bxor' },
];

const largeCounts: ConformanceCase = {
  name: 'reducescatter: 2^20 + 3 elements (float32 sum, float64 average postscaled, int32 sum, int64 bxor)',
  async run(rr, rank, size) {
    for (const { dtype, op, scales } of kLargeSubset) await reducescatterOnce(rr, rank, size, dtype, op, kLargeCount, scales);
  },
};

const kRowLength = 3;

const shaped: ConformanceCase = {
  name: "reducescatter: 2-D tensors of 0, 1, N-1, N, N+1, 2N+1 rows, every dtype, { data, shape } out; odd ranks pass 'out'",
  async run(rr, rank, size) {
    const rowCounts = [...new Set([0, 1, Math.max(0, size - 1), size, size + 1, 2 * size + 1])];
    await settleAll(
      rowCounts.flatMap((rows) =>
        kDTypes.map((dtype) => {
          const op: ReduceOp = dtype.startsWith('float') ? 'average' : 'max';
          const name = `rs-2d/${dtype}/${rows}`;
          return part(name, async () => {
            const reference = referenceInput(dtype, rank, rows * kRowLength, op);
            const mine = reference.slice();
            const myRows = evenSplits(rows, size)[rank] as number;
            const out = rank % 2 === 1 ? allocShared(dtype, myRows * kRowLength) : undefined;
            const tensor = { data: mine, shape: [rows, kRowLength] };
            const result = await rr.reducescatter(tensor, out ? { name, op, out } : { name, op });
            if (out) check(result.data === out, `${name}: option 'out'`, 'the result is not the given out');
            checkJson(result.shape, [myRows, kRowLength], `${name}: the shape`);
            checkArray(dtype, result.data, expectedPart(dtype, op, rows, kRowLength, rank, size), name);
            checkArray(dtype, mine, reference, `${name}: the input was modified`);
          });
        }),
      ),
    );
  },
};

const scaled: ConformanceCase = {
  name: 'reducescatter: prescale and postscale, float32 and float64, every op, N+1 and 1000 elements',
  async run(rr, rank, size) {
    const all: Promise<void>[] = [];
    for (const dtype of ['float32', 'float64'] as const) {
      for (const op of ['sum', 'average', 'min', 'max', 'product'] as const) {
        for (const count of [size + 1, 1000]) {
          all.push(reducescatterOnce(rr, rank, size, dtype, op, count, { prescale: 0.5, postscale: 3 }));
          all.push(reducescatterOnce(rr, rank, size, dtype, op, count, { prescale: -1.25 }));
          all.push(reducescatterOnce(rr, rank, size, dtype, op, count, { postscale: 0.1 }));
        }
      }
    }
    await settleAll(all);
  },
};

const refused: ConformanceCase = {
  name: "reducescatter: argument errors at the call (bitwise op on floats, scale factors on integers, wrong 'splits', a wrong out), no rank waits",
  async run(rr, rank, size) {
    const last = rank === size - 1;
    if (last) {
      await checkRefused(
        'bitwise op on float32',
        "option 'op' is 'band' but the tensor is float32: bitwise ops need an integer dtype",
        () => rr.reducescatter(new Float32Array(4), { name: 'rs-arg', op: 'band' }),
      );
      await checkRefused('prescale on int32', "option 'prescale' needs a float tensor, got int32", () =>
        rr.reducescatter(new Int32Array(4), { name: 'rs-arg', prescale: 2 }),
      );
      await checkRefused('postscale on uint64', "option 'postscale' needs a float tensor, got uint64", () =>
        rr.reducescatter(new BigUint64Array(4), { name: 'rs-arg', postscale: 0.5 }),
      );
      await checkRefused("'splits' adding up to a row less", `option 'splits' adds up to 3 rows but the tensor has 4`, () =>
        rr.reducescatter(
          { data: new Float32Array(8), shape: [4, 2] },
          { name: 'rs-arg', splits: [3, ...new Array<number>(size - 1).fill(0)] },
        ),
      );
      await checkRefused(
        "'splits' with a fraction",
        `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got ${JSON.stringify([3.5, ...new Array(size - 1).fill(0.5 / Math.max(1, size - 1))])}`,
        () =>
          rr.reducescatter(
            { data: new Float32Array(8), shape: [4, 2] },
            { name: 'rs-arg', splits: [3.5, ...new Array<number>(size - 1).fill(0.5 / Math.max(1, size - 1))] },
          ),
      );
      const myRows = evenSplits(4, size)[rank] as number;
      await checkRefused(
        "an 'out' a row too long",
        `option 'out' has ${(myRows + 1) * 2} elements but this rank's ${myRows} rows of the result has ${myRows * 2}`,
        () =>
          rr.reducescatter(
            { data: new Float32Array(8), shape: [4, 2] },
            { name: 'rs-arg', out: allocShared('float32', (myRows + 1) * 2) as Float32Array },
          ),
      );
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const result = await rr.reducescatter(new Int32Array(size).fill(rank + 1), { name: 'rs-arg', op: 'bor' });
    const expected = Array.from({ length: size }, (_, r) => r + 1).reduce((a, b) => a | b, 0);
    checkJson([...result], [expected], 'the call after the refused ones');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'reducescatter shapes',
    MismatchError,
    (size) => `Mismatched shapes for tensor 'mm/rs-shape': rank 0 has [4, 3], rank ${size - 1} has [3, 4].`,
    (rr, odd) => rr.reducescatter({ data: new Float32Array(12), shape: odd ? [3, 4] : [4, 3] }, { name: 'mm/rs-shape' }),
  ),
  mismatch(
    'reducescatter prescale',
    MismatchError,
    (size) =>
      `Mismatched scale factors for tensor 'mm/rs-prescale': rank 0 has prescale 1, postscale 1, ` +
      `rank ${size - 1} has prescale 2, postscale 1.`,
    (rr, odd) => rr.reducescatter(new Float64Array(6), { name: 'mm/rs-prescale', ...(odd ? { prescale: 2 } : {}) }),
  ),
  mismatch(
    'reducescatter reduce ops',
    MismatchError,
    (size) => `Mismatched reduce ops for tensor 'mm/rs-op': rank 0 has band, rank ${size - 1} has bxor.`,
    (rr, odd) => rr.reducescatter(new Uint16Array(6), { name: 'mm/rs-op', op: odd ? 'bxor' : 'band' }),
  ),
  mismatch(
    'reducescatter splits',
    MismatchError,
    (size) =>
      `Mismatched reducescatter splits for tensor 'mm/rs-splits': rank 0 has the even split, rank ${size - 1} has [${size}${', 0'.repeat(size - 1)}].`,
    (rr, odd, _rank, size) => {
      const splits = [size, ...new Array<number>(size - 1).fill(0)];
      return rr.reducescatter(
        { data: new Float32Array(size), shape: [size, 1] },
        { name: 'mm/rs-splits', ...(odd ? { splits } : {}) },
      );
    },
  ),
];

const sync: ConformanceCase = {
  name: 'reducescatterSync: 2-D float32 average with a postscale, 1-D int16 bor',
  needsSync: true,
  async run(rr, rank, size) {
    const rows = 2 * size + 1;
    const reference = referenceInput('float32', rank, rows * 2, 'average');
    const avg = rr.reducescatterSync(
      { data: reference.slice() as Float32Array, shape: [rows, 2] },
      { name: 'rs-sync/avg', op: 'average', postscale: 4 },
    );
    const myRows = evenSplits(rows, size)[rank] as number;
    checkJson(avg.shape, [myRows, 2], 'average: the shape');
    checkArray('float32', avg.data, expectedPart('float32', 'average', rows, 2, rank, size, { postscale: 4 }), 'average');
    const bits = rr.reducescatterSync(referenceInput('int16', rank, size + 1, 'bor').slice() as Int16Array, {
      name: 'rs-sync/bor',
      op: 'bor',
    });
    checkArray('int16', bits, expectedPart('int16', 'bor', size + 1, 1, rank, size), 'bor');
  },
};

const inPlace: ConformanceCase = {
  name: "reducescatter in place: out is this rank's rows of the tensor itself, every dtype, 2-D, N+1 and 1000 rows",
  async run(rr, rank, size) {
    const calls = kDTypes.flatMap((dtype) =>
      [size + 1, 1000].map(async (rows) => {
        const name = `rs-in-place/${dtype}/${rows}`;
        await part(name, async () => {
          const rowLength = 3;
          const tensor = allocShared(dtype, rows * rowLength);
          tensor.set(referenceInput(dtype, rank, rows * rowLength, 'sum') as never);
          const splits = evenSplits(rows, size);
          const start = (offsetsOf(splits)[rank] as number) * rowLength;
          const out = tensor.subarray(start, start + (splits[rank] as number) * rowLength);
          const result = await rr.reducescatter({ data: tensor, shape: [rows, rowLength] }, { name, out });
          check(result.data === out, name, 'the result is the given view of the tensor');
          checkArray(dtype, out, expectedPart(dtype, 'sum', rows, rowLength, rank, size), name);
        });
      }),
    );
    await settleAll(calls);
  },
};

/** Rows of the result per rank for explicit splits: uneven, some ranks none (0 to 2 rows), 2 rows or more in all. */
function unevenSplits(size: number): number[] {
  const splits = Array.from({ length: size }, (_, r) => (2 * r + 1) % 3);
  splits[0] = (splits[0] as number) + 1;
  return splits;
}

const withSplits: ConformanceCase = {
  name: "reducescatter with option 'splits' (uneven, zero rows; an array or an Int32Array): every dtype, twice (cached), in place, fp16",
  async run(rr, rank, size) {
    const splits = unevenSplits(size);
    const rows = splits.reduce((a, b) => a + b, 0);
    const start = offsetsOf(splits)[rank] as number;
    const myRows = splits[rank] as number;
    const calls = kDTypes.map(async (dtype, i) => {
      const op: ReduceOp = dtype.startsWith('float') ? 'average' : 'max';
      const name = `rs-splits/${dtype}`;
      // The second round repeats the name: ranks then run it from the response cache, splits and all.
      // Both rounds run whatever the first gave, so that every rank makes the same calls.
      const failures: unknown[] = [];
      for (const round of [0, 1]) {
        const outcome = part(`${name}, round ${round}`, async () => {
          const reference = referenceInput(dtype, rank, rows * kRowLength, op);
          const mine = reference.slice();
          const result = await rr.reducescatter(
            { data: mine, shape: [rows, kRowLength] },
            { name, op, splits: i % 2 === 0 ? splits : Int32Array.from(splits) },
          );
          checkJson(result.shape, [myRows, kRowLength], `${name}: the shape`);
          const whole = referenceAllreduce(dtype, op, rows * kRowLength, size);
          checkArray(dtype, result.data, rowsOf(whole, start, myRows, kRowLength), name);
          checkArray(dtype, mine, reference, `${name}: the input was modified`);
        });
        failures.push(
          await outcome.then(
            () => undefined,
            (error: unknown) => error,
          ),
        );
      }
      const failure = failures.find((f) => f !== undefined);
      if (failure !== undefined) throw failure;
    });
    calls.push(
      part('in place', async () => {
        const tensor = allocShared('int32', rows * kRowLength);
        tensor.set(referenceInput('int32', rank, rows * kRowLength, 'sum') as never);
        const out = tensor.subarray(start * kRowLength, (start + myRows) * kRowLength);
        const result = await rr.reducescatter(
          { data: tensor, shape: [rows, kRowLength] },
          { name: 'rs-splits/in-place', out, splits },
        );
        check(result.data === out, 'in place', 'the result is the given view of the tensor');
        const whole = referenceAllreduce('int32', 'sum', rows * kRowLength, size);
        checkArray('int32', out, rowsOf(whole, start, myRows, kRowLength), 'in place');
      }),
      part('fp16', async () => {
        // Small integers: exact in half precision, so the sum is too.
        const tensor = { data: new Float32Array(rows * 2).fill(rank + 1), shape: [rows, 2] };
        const result = await rr.reducescatter(tensor, { name: 'rs-splits/fp16', splits, compression: 'fp16' });
        checkJson(result.shape, [myRows, 2], 'fp16: the shape');
        checkJson([...result.data], new Array(myRows * 2).fill((size * (size + 1)) / 2), 'fp16: the values');
      }),
    );
    await settleAll(calls);
  },
};

export const reducescatterCases: readonly ConformanceCase[] = [
  smallCounts,
  inPlace,
  withSplits,
  largeCounts,
  shaped,
  scaled,
  refused,
  ...mismatches,
  sync,
];
