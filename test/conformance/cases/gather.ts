/**
 * Gather: the root gets every rank's tensor concatenated along the first dimension in rank
 * order (first dimensions differ per rank, some zero), the others null. Every root, every
 * dtype, the root's option 'out', the kind of the result, mismatches, argument errors, the Sync
 * twin.
 *
 * Large: one case of 2^20 + 3 float32 elements per rank, not every dtype.
 */
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { InvalidArgumentError, MismatchError } from '../../../src/core/errors.js';
import type { TypedArray } from '../../../src/core/types.js';
import { concatenated, referenceInput } from '../../helpers/reference.js';
import { kLargeCount } from './allreduce.js';
import { type ConformanceCase, check, checkArray, checkJson, checkRefused, part, settleAll } from './case.js';
import { mismatch } from './negotiation.js';

/** Rows of rank r: 0, 3, 2, 1, 0, ... (rank 0 and rank 4 send nothing). */
const rows = (rank: number) => (rank * 3) % 4;
const kRowLength = 5;

const everyRoot: ConformanceCase = {
  name: "gather: to every root, first dimensions differ per rank (some zero), every dtype; odd roots pass 'out'",
  async run(rr, rank, size) {
    const totalRows = Array.from({ length: size }, (_, r) => rows(r)).reduce((a, b) => a + b, 0);
    for (let root = 0; root < size; root++) {
      await settleAll(
        kDTypes.map((dtype) => {
          const name = `gather/${dtype}/root ${root}`;
          return part(name, async () => {
            const inputs = Array.from({ length: size }, (_, r) => referenceInput(dtype, r, rows(r) * kRowLength, 'sum'));
            const reference = inputs[rank] as TypedArray;
            const mine = reference.slice();
            const out = rank === root && root % 2 === 1 ? allocShared(dtype, totalRows * kRowLength) : undefined;
            const tensor = { data: mine, shape: [rows(rank), kRowLength] };
            const result = await rr.gather(tensor, out ? { name, root, out } : { name, root });
            checkArray(dtype, mine, reference, `${name}: the input was modified`);
            if (rank !== root) {
              check(result === null, name, 'a non-root got a result');
              return;
            }
            check(result !== null, name, 'the root got null');
            if (out) check(result?.data === out, `${name}: option 'out'`, 'the result is not the given out');
            checkJson(result?.shape, [totalRows, kRowLength], `${name}: the shape`);
            checkArray(dtype, result?.data as TypedArray, concatenated(dtype, inputs), name);
          });
        }),
      );
    }
  },
};

const plain: ConformanceCase = {
  name: 'gather: a typed array in gives the same class out on the root (default root 0), in rank order',
  async run(rr, rank, size) {
    const result = await rr.gather(new Int16Array([rank, -rank - 1]), { name: 'gather/plain' });
    if (rank !== 0) {
      check(result === null, 'a non-root', 'got a result');
      return;
    }
    check(result instanceof Int16Array, 'the result', `is a ${result?.constructor.name}`);
    checkJson([...(result as Int16Array)], Array.from({ length: size }, (_, r) => [r, -r - 1]).flat(), 'the values');
  },
};

const large: ConformanceCase = {
  name: 'gather: 2^20 + 3 float32 elements per rank to the last rank',
  async run(rr, rank, size) {
    const root = size - 1;
    const inputs = Array.from({ length: size }, (_, r) => referenceInput('float32', r, kLargeCount, 'sum'));
    const result = await rr.gather((inputs[rank] as TypedArray).slice(), { name: 'gather/large', root });
    if (rank !== root) check(result === null, 'a non-root', 'got a result');
    else checkArray('float32', result as TypedArray, concatenated('float32', inputs), 'the values');
  },
};

const refused: ConformanceCase = {
  name: "gather: argument errors at the call (a root out of range, an 'out' not shared or of another dtype, no dimension), no rank waits",
  async run(rr, rank, size) {
    if (rank === size - 1) {
      const tensor = { data: new Int32Array(2), shape: [1, 2] };
      await checkRefused('a root out of range', `option 'root' must be an integer rank in [0, ${size - 1}], got -1`, () =>
        rr.gather(tensor, { name: 'gather-arg', root: -1 }),
      );
      await checkRefused(
        "an 'out' not in shared memory",
        "option 'out' must be backed by a SharedArrayBuffer (the engine thread writes into it)",
        () => rr.gather(tensor, { name: 'gather-arg', root: rank, out: new Int32Array(2 * size) }),
      );
      await checkRefused(
        "an 'out' of another dtype",
        "option 'out' must be a int32 typed array like the tensor, got Float32Array",
        () => rr.gather(tensor, { name: 'gather-arg', root: rank, out: allocShared('float32', 2 * size) as Float32Array }),
      );
      await checkRefused(
        'a tensor without dimensions',
        'tensor of gather must have at least one dimension (it works along the first)',
        () => rr.gather({ data: new Int32Array(1), shape: [] }, { name: 'gather-arg' }),
      );
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const result = await rr.gather(new Int32Array([rank, rank]), { name: 'gather-arg', root: size - 1 });
    if (rank === size - 1) {
      checkJson(
        result === null ? null : [...result],
        [...Array(size).keys()].flatMap((r) => [r, r]),
        'the call after the refused ones',
      );
    } else check(result === null, 'the call after the refused ones', 'a non-root got a result');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'gather roots',
    MismatchError,
    (size) => `Mismatched gather roots for tensor 'mm/gather-root': rank 0 has root 0, rank ${size - 1} has root 1.`,
    (rr, odd) => rr.gather(new Float32Array(3), { name: 'mm/gather-root', root: odd ? 1 : 0 }),
  ),
  mismatch(
    'gather trailing dimensions',
    MismatchError,
    (size) =>
      `Mismatched gather dimensions after the first for tensor 'mm/gather-dims': rank 0 has [2], rank ${size - 1} has [3].`,
    (rr, odd) => rr.gather({ data: new Uint8Array(odd ? 3 : 2), shape: [1, odd ? 3 : 2] }, { name: 'mm/gather-dims' }),
  ),
  mismatch(
    "the gather root's 'out' length",
    InvalidArgumentError,
    (size) => {
      const firstDims = Array.from({ length: size }, (_, r) => r + 1);
      const total = 2 * firstDims.reduce((a, b) => a + b, 0);
      return (
        `Wrong 'out' for gather of tensor 'mm/gather-out': root ${size - 1}'s has ${total - 2} elements, ` +
        `the result has ${total} (first dimensions [${firstDims.join(', ')}] × 2 elements per row).`
      );
    },
    (rr, odd, rank, size) => {
      // Rows 1, 2, ..., size of 2 elements each; the root (the last rank) has an 'out' a row short.
      const out = odd ? (allocShared('float32', size * (size + 1) - 2) as Float32Array) : undefined;
      const tensor = { data: new Float32Array(2 * (rank + 1)), shape: [rank + 1, 2] };
      return rr.gather(tensor, out ? { name: 'mm/gather-out', root: size - 1, out } : { name: 'mm/gather-out', root: size - 1 });
    },
  ),
];

const sync: ConformanceCase = {
  name: 'gatherSync: first dimensions differ per rank, to the last rank',
  needsSync: true,
  async run(rr, rank, size) {
    const inputs = Array.from({ length: size }, (_, r) => referenceInput('uint32', r, rows(r) * 2, 'sum'));
    const root = size - 1;
    const result = rr.gatherSync(
      { data: (inputs[rank] as TypedArray).slice() as Uint32Array, shape: [rows(rank), 2] },
      { name: 'gather-sync', root },
    );
    if (rank !== root) {
      check(result === null, 'a non-root', 'got a result');
      return;
    }
    checkJson(result?.shape, [inputs.reduce((n, input) => n + input.length, 0) / 2, 2], 'the shape');
    checkArray('uint32', result?.data as TypedArray, concatenated('uint32', inputs), 'the values');
  },
};

export const gatherCases: readonly ConformanceCase[] = [everyRoot, plain, large, refused, ...mismatches, sync];
