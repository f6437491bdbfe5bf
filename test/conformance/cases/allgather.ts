/**
 * Allgather: first dimensions that differ per rank (some zero), every length the issue names,
 * option 'out', repeated calls, the Sync twin.
 */
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import type { TypedArray } from '../../../src/core/types.js';
import { concatenated, referenceInput } from '../../helpers/reference.js';
import { type ConformanceCase, check, checkArray, checkJson, edgeCounts, part, settleAll } from './case.js';

/** Rows of rank r: 0, 3, 2, 1, 0, ... (rank 0 and rank 4 gather nothing). */
const rows = (rank: number) => (rank * 3) % 4;
const kRowLength = 5;

const uneven: ConformanceCase = {
  name: "allgather: first dimensions differ per rank (some zero), every dtype; even ranks pass 'out'",
  async run(rr, rank, size) {
    const totalRows = Array.from({ length: size }, (_, r) => rows(r)).reduce((a, b) => a + b, 0);
    await settleAll(
      kDTypes.map((dtype) =>
        part(`ag/${dtype}`, async () => {
          const inputs = Array.from({ length: size }, (_, r) => referenceInput(dtype, r, rows(r) * kRowLength, 'sum'));
          const reference = inputs[rank] as TypedArray;
          const mine = reference.slice();
          // Even ranks gather into their own 'out' (the MPI addon's allgatherv writes there directly).
          const out = rank % 2 === 0 ? allocShared(dtype, totalRows * kRowLength) : undefined;
          const tensor = { data: mine, shape: [rows(rank), kRowLength] };
          const name = `ag/${dtype}`;
          const result = await rr.allgather(tensor, out ? { name, out } : { name });
          if (out) check(result.data === out, `${name}: option 'out'`, 'the result is not the given out');
          checkJson(result.shape, [totalRows, kRowLength], `${name}: the shape`);
          checkArray(dtype, result.data, concatenated(dtype, inputs), name);
          checkArray(dtype, mine, reference, `${name}: the input was modified`);
        }),
      ),
    );
  },
};

const everyLength: ConformanceCase = {
  name: 'allgather: every dtype, every rank counts 0, 1, N-1, N, N+1 or 1000, all in flight at once',
  async run(rr, rank, size) {
    const counts = edgeCounts(size);
    await settleAll(
      counts.flatMap((count) =>
        kDTypes.map((dtype) => {
          const name = `ag/${dtype}/${count}`;
          return part(name, async () => {
            const inputs = Array.from({ length: size }, (_, r) => referenceInput(dtype, r, count, 'sum'));
            const result = await rr.allgather((inputs[rank] as TypedArray).slice(), { name });
            checkArray(dtype, result, concatenated(dtype, inputs), name);
          });
        }),
      ),
    );
  },
};

const repeated: ConformanceCase = {
  name: 'allgather: repeated calls of changing sizes each return their own values (the input copy is reused memory)',
  async run(rr, rank, size) {
    for (const [step, rowsPerRank] of [3, 1, 4, 2, 4].entries()) {
      const rowsOf = (r: number) => (r + step) % (rowsPerRank + 1);
      const inputOf = (r: number) => Int32Array.from({ length: rowsOf(r) * 3 }, (_, i) => r * 1000 + step * 100 + i);
      const result = await rr.allgather({ data: inputOf(rank), shape: [rowsOf(rank), 3] }, { name: 'ag/loop' });
      const expected = concatenated(
        'int32',
        Array.from({ length: size }, (_, r) => inputOf(r)),
      );
      checkArray('int32', result.data, expected, `step ${step}`);
    }
  },
};

const plain: ConformanceCase = {
  name: 'allgather: a typed array in gives the same class out, in rank order',
  async run(rr, rank, size) {
    const result = await rr.allgather(new Float64Array([rank, rank + 0.5]), { name: 'ag/plain' });
    check(result instanceof Float64Array, 'the result', `is a ${result.constructor.name}`);
    checkJson([...result], Array.from({ length: size }, (_, r) => [r, r + 0.5]).flat(), 'the values');
  },
};

const sync: ConformanceCase = {
  name: 'allgatherSync: first dimensions differ per rank',
  needsSync: true,
  async run(rr, rank, size) {
    const inputs = Array.from({ length: size }, (_, r) => referenceInput('uint16', r, rows(r) * 2, 'sum'));
    const result = rr.allgatherSync({ data: (inputs[rank] as TypedArray).slice(), shape: [rows(rank), 2] }, { name: 'ag-sync' });
    checkJson(result.shape, [inputs.reduce((n, input) => n + input.length, 0) / 2, 2], 'the shape');
    checkArray('uint16', result.data, concatenated('uint16', inputs), 'the values');
  },
};

export const allgatherCases: readonly ConformanceCase[] = [uneven, everyLength, repeated, plain, sync];
