/**
 * fp16 compression (option 'compression'): allreduce, allgather and reducescatter of float32
 * tensors sent as IEEE half precision and reduced in float32. Values exactly representable in
 * fp16 whose results are too give exact results for every op (averages: the sum's division
 * rounded to fp16); random values stay within the error bound of one fp16 rounding per step;
 * compressed and uncompressed tensors in flight together (and one name switching between the
 * two) never mix; a compression mismatch rejects on every rank; non-float32 tensors are refused.
 */
import { allocShared } from '../../../src/core/dtypes.js';
import { MismatchError } from '../../../src/core/errors.js';
import { floatFromHalf, halfFromFloat } from '../../../src/core/float16.js';
import type { ReduceOp } from '../../../src/core/types.js';
import { evenSplits, offsetsOf } from '../../helpers/reference.js';
import { kLargeCount } from './allreduce.js';
import { type ConformanceCase, check, checkJson, checkRefused, part, settleAll } from './case.js';
import { mismatch } from './negotiation.js';

/** A value exactly representable in fp16 whose sums over 5 ranks are too (halves from -2 to 6). */
function exactValue(rank: number, i: number): number {
  return ((i % 9) - 4) * 0.5 + rank;
}

/** Powers of two with signs: their products over 5 ranks are exact in fp16. */
function powerValue(rank: number, i: number): number {
  return (i % 5 === rank % 5 ? -1 : 1) * 2 ** (((i + rank) % 3) - 1);
}

function inputOf(op: ReduceOp, rank: number, count: number): Float32Array {
  const value = op === 'product' ? powerValue : exactValue;
  return Float32Array.from({ length: count }, (_, i) => value(rank, i));
}

/** fp16 rounding of a float32 value. */
function rounded(value: number): number {
  return floatFromHalf(halfFromFloat(value));
}

/** Expectations by op, count and size: the ranks of an in-process world share them. */
const kExpected = new Map<string, Float32Array>();

/** The result every rank expects: exact but for 'average', whose division rounds once to fp16. */
function expected(op: ReduceOp, count: number, size: number): Float32Array {
  const key = `${op}/${count}/${size}`;
  let want = kExpected.get(key);
  if (want) return want;
  want = inputOf(op, 0, count);
  for (let r = 1; r < size; r++) {
    const input = inputOf(op, r, count);
    for (let i = 0; i < count; i++) {
      const a = want[i] as number;
      const b = input[i] as number;
      if (op === 'product') want[i] = a * b;
      else if (op === 'min') want[i] = Math.min(a, b);
      else if (op === 'max') want[i] = Math.max(a, b);
      else want[i] = a + b;
    }
  }
  if (op === 'average') for (let i = 0; i < count; i++) want[i] = rounded((want[i] as number) / size);
  kExpected.set(key, want);
  return want;
}

function checkValues(actual: Float32Array, want: Float32Array, what: string): void {
  check(actual instanceof Float32Array, what, `the result is a ${actual.constructor.name}`);
  check(actual.length === want.length, what, `${actual.length} elements, not ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (actual[i] !== want[i]) check(false, what, `element ${i} is ${actual[i]}, not ${want[i]}`);
  }
}

const kOps: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product'];

const exactAllreduce: ConformanceCase = {
  name: "compression 'fp16': allreduce of fp16-exact values is exact, every float op, counts 0 to 1000 (and 2^20 + 3)",
  async run(rr, rank, size) {
    // 8 elements travel eagerly; 1000 and the large count take the algorithms (large: the ring,
    // for sum and average only: the kernels of the other ops are the same at every count).
    const counts = [0, 1, 8, size + 1, 1000, kLargeCount];
    await settleAll(
      counts.flatMap((count) =>
        kOps
          .filter((op) => count < kLargeCount || op === 'sum' || op === 'average')
          .map((op) => {
            const name = `fp16/ar/${op}/${count}`;
            return part(name, async () => {
              const mine = inputOf(op, rank, count);
              const result = await rr.allreduce(mine, { name, op, compression: 'fp16' });
              checkValues(result, expected(op, count, size), name);
              checkValues(mine, inputOf(op, rank, count), `${name}: the input was modified`);
            });
          }),
      ),
    );
  },
};

/** Uniform in [-1, 1), from a seed: the same on every rank for the same seed. */
function randomValues(seed: number, count: number): Float32Array {
  let state = seed >>> 0 || 1;
  return Float32Array.from({ length: count }, () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) / 2 ** 32) * 2 - 1;
  });
}

const randomAllreduce: ConformanceCase = {
  name: "compression 'fp16': allreduce of random values is within one fp16 rounding per step",
  async run(rr, rank, size) {
    const count = 10_000;
    const inputs = Array.from({ length: size }, (_, r) => randomValues(r + 11, count));
    const result = await rr.allreduce(inputs[rank] as Float32Array, { name: 'fp16/ar/random', compression: 'fp16' });
    // Each rank's input rounds once, every step of the reduction once more: 2N roundings, each
    // within 2^-11 of the magnitude the partial sums reach (at most the sum of magnitudes).
    for (let i = 0; i < count; i++) {
      let exact = 0;
      let magnitude = 0;
      for (const input of inputs) {
        exact += input[i] as number;
        magnitude += Math.abs(input[i] as number);
      }
      const bound = 2 * size * 2 ** -11 * magnitude + size * 2 ** -24;
      const error = Math.abs((result[i] as number) - exact);
      check(error <= bound, 'fp16/ar/random', `element ${i}: ${result[i]} is ${error} from ${exact}, beyond ${bound}`);
    }
  },
};

const gatherAndScatter: ConformanceCase = {
  name: "compression 'fp16': allgather and reducescatter, 2-D, with and without 'out'",
  async run(rr, rank, size) {
    const rowLength = 3;
    await settleAll([
      part('fp16/ag', async () => {
        // Rank r gives r + 1 rows; every value rounds to fp16 on the way.
        const data = Float32Array.from({ length: (rank + 1) * rowLength }, (_, i) => rank + i / 3);
        const result = await rr.allgather({ data, shape: [rank + 1, rowLength] }, { name: 'fp16/ag', compression: 'fp16' });
        const want = Float32Array.from(
          Array.from({ length: size }, (_, r) =>
            Array.from({ length: (r + 1) * rowLength }, (_, i) => rounded(r + i / 3)),
          ).flat(),
        );
        checkJson(result.shape, [(size * (size + 1)) / 2, rowLength], 'fp16/ag shape');
        checkValues(result.data, want, 'fp16/ag');
      }),
      part('fp16/ag/out', async () => {
        const out = allocShared('float32', size * 2) as Float32Array;
        const result = await rr.allgather(new Float32Array([rank, 0.1]), { name: 'fp16/ag/out', out, compression: 'fp16' });
        check(result === out, 'fp16/ag/out', 'the result is not out');
        const want = Float32Array.from(Array.from({ length: size }, (_, r) => [r, rounded(0.1)]).flat());
        checkValues(out, want, 'fp16/ag/out');
      }),
      ...[false, true].map((withOut) =>
        part(`fp16/rs/${withOut}`, async () => {
          const rows = 2 * size + 1;
          const count = rows * rowLength;
          const splits = evenSplits(rows, size);
          const myRows = splits[rank] as number;
          const start = (offsetsOf(splits)[rank] as number) * rowLength;
          const out = withOut ? (allocShared('float32', myRows * rowLength) as Float32Array) : undefined;
          const result = await rr.reducescatter(
            { data: inputOf('average', rank, count), shape: [rows, rowLength] },
            { name: `fp16/rs/${withOut}`, op: 'average', compression: 'fp16', ...(out ? { out } : {}) },
          );
          if (out) check(result.data === out, 'fp16/rs out', 'the result is not out');
          checkJson(result.shape, [myRows, rowLength], 'fp16/rs shape');
          const want = expected('average', count, size).subarray(start, start + myRows * rowLength);
          checkValues(result.data, want, `fp16/rs/${withOut}`);
        }),
      ),
    ]);
  },
};

/** 1 + 2^-20: exact in float32, 1 in fp16; what tells a compressed result from an uncompressed one. */
const kFine = 1 + 2 ** -20;

const neverMixed: ConformanceCase = {
  name: "compression 'fp16' and 'none' in flight together and under one name: never fused or cached together",
  async run(rr, _rank, size) {
    const fineSum = Math.fround(size * kFine);
    const calls = [];
    for (let i = 0; i < 4; i++) {
      const compression = i % 2 === 0 ? 'fp16' : 'none';
      const want = compression === 'fp16' ? size : fineSum;
      calls.push(
        part(`mixed/${i}`, async () => {
          const result = await rr.allreduce(new Float32Array(16).fill(kFine), { name: `mixed/${i}`, compression });
          check(
            result.every((v) => v === want),
            `mixed/${i} (${compression})`,
            `${result[0]}, not ${want}`,
          );
        }),
      );
    }
    calls.push(
      part('mixed/grouped', async () => {
        const [a, b] = await rr.groupedAllreduce([new Float32Array(5).fill(kFine), new Float32Array(7).fill(kFine)], {
          name: 'mixed/grouped',
          compression: 'fp16',
        });
        check(
          a?.every((v) => v === size) === true && b?.every((v) => v === size) === true,
          'mixed/grouped',
          `${a?.[0]}, ${b?.[0]}`,
        );
      }),
    );
    await settleAll(calls);
    // One name, its compression switching from step to step (the response cache must tell them apart).
    for (let step = 0; step < 4; step++) {
      const compression = step % 2 === 0 ? 'none' : 'fp16';
      const result = await rr.allreduce(new Float32Array(300).fill(kFine), { name: 'mixed/step', compression });
      const want = compression === 'fp16' ? size : fineSum;
      check(result[299] === want, `mixed/step ${step} (${compression})`, `${result[299]}, not ${want}`);
    }
  },
};

const syncTwins: ConformanceCase = {
  name: "compression 'fp16': allreduceSync, allgatherSync, reducescatterSync",
  needsSync: true,
  async run(rr, rank, size) {
    const sum = rr.allreduceSync(new Float32Array([rank, kFine]), { name: 'fp16-sync/ar', compression: 'fp16' });
    checkValues(sum, new Float32Array([(size * (size - 1)) / 2, size]), 'allreduceSync');
    const gathered = rr.allgatherSync(new Float32Array([kFine]), { name: 'fp16-sync/ag', compression: 'fp16' });
    checkValues(gathered, new Float32Array(size).fill(1), 'allgatherSync');
    const part = rr.reducescatterSync(new Float32Array(size).fill(0.5), { name: 'fp16-sync/rs', compression: 'fp16' });
    checkValues(part, new Float32Array([size / 2]), 'reducescatterSync');
  },
};

const refused: ConformanceCase = {
  name: "compression 'fp16' of a non-float32 tensor, or an unknown compression, is refused at the call",
  async run(rr, _rank, size) {
    const why = (dtype: string) =>
      `option 'compression' is 'fp16' but the tensor is ${dtype}: fp16 compression takes float32 tensors only`;
    await checkRefused('allreduce float64', why('float64'), () =>
      rr.allreduce(new Float64Array(2), { name: 'fp16/refused', compression: 'fp16' }),
    );
    await checkRefused('allgather int32', why('int32'), () =>
      rr.allgather(new Int32Array(2), { name: 'fp16/refused', compression: 'fp16' }),
    );
    await checkRefused('reducescatter uint16', why('uint16'), () =>
      rr.reducescatter(new Uint16Array(size), { name: 'fp16/refused', compression: 'fp16' }),
    );
    await checkRefused('unknown compression', `option 'compression' must be one of none, fp16, got "fp8"`, () =>
      rr.allreduce(new Float32Array(2), { name: 'fp16/refused', compression: 'fp8' as 'fp16' }),
    );
    // The name was never taken: every rank can still use it.
    const result = await rr.allreduce(new Float32Array([1]), { name: 'fp16/refused', compression: 'fp16' });
    checkJson([...result], [size], 'the call after the refused ones');
  },
};

const mismatches: ConformanceCase[] = [
  mismatch(
    'compression',
    MismatchError,
    (size) =>
      `Mismatched data types for tensor 'mm/compression': rank 0 has float32 with compression 'fp16', rank ${size - 1} has float32.`,
    (rr, odd) => rr.allreduce(new Float32Array(4), { name: 'mm/compression', compression: odd ? 'none' : 'fp16' }),
  ),
  mismatch(
    'allgather compression',
    MismatchError,
    (size) =>
      `Mismatched data types for tensor 'mm/ag-compression': rank 0 has float32 with compression 'fp16', rank ${size - 1} has float32.`,
    (rr, odd) => rr.allgather(new Float32Array(4), { name: 'mm/ag-compression', compression: odd ? 'none' : 'fp16' }),
  ),
];

const withJoin: ConformanceCase = {
  name: "compression 'fp16' with join: joined ranks contribute the identities, averages divide by the others",
  async run(rr, rank, size) {
    for (let step = 0; step <= rank; step++) {
      // Ranks step..size-1 still take part at this step; rank r gives [r, r + 1, 2].
      const mine = new Float32Array([rank, rank + 1, 2]);
      const [mean, low, product] = await Promise.all([
        rr.allreduce(mine, { name: 'fp16-join/avg', op: 'average', compression: 'fp16' }),
        rr.allreduce(mine, { name: 'fp16-join/min', op: 'min', compression: 'fp16' }),
        rr.allreduce(mine, { name: 'fp16-join/product', op: 'product', compression: 'fp16' }),
      ]);
      const ranks = size - step;
      const want = rounded((step + size - 1) / 2);
      check(mean[0] === want, `average at step ${step}`, `${mean[0]} != ${want}`);
      check(low[1] === step + 1, `min at step ${step}`, `${low[1]} != ${step + 1}`);
      check(product[2] === 2 ** ranks, `product at step ${step}`, `${product[2]} != ${2 ** ranks}`);
    }
    await rr.join();
  },
};

/** This rank's data-plane bytes sent so far, or undefined where the engine keeps no stats (the memory backend). */
function sentBytes(rr: Parameters<ConformanceCase['run']>[0]): number | undefined {
  try {
    return rr.stats().sentBytes;
  } catch {
    return undefined;
  }
}

const halfTheBytes: ConformanceCase = {
  name: "compression 'fp16' sends half the bytes of float32 (rr.stats' data-plane bytes)",
  minRanks: 2,
  async run(rr, _rank, size) {
    const count = 2 ** 20;
    const sent: number[] = [];
    for (const compression of ['none', 'fp16'] as const) {
      const before = sentBytes(rr);
      const result = await rr.allreduce(new Float32Array(count).fill(1), { name: `fp16/bytes/${compression}`, compression });
      check(result[count - 1] === size, `bytes/${compression}`, `${result[count - 1]} != ${size}`);
      const after = sentBytes(rr);
      if (before !== undefined && after !== undefined) sent.push(after - before);
    }
    if (sent.length < 2) return;
    const [plain, half] = sent as [number, number];
    if (rr.backend() === 'mpi') {
      // float32 runs MPI's own allreduce, whose bytes rr.stats does not see; fp16 runs the ring
      // over MPI point-to-point: 2(N-1)/N of the fp16 tensor, give or take the uneven chunks.
      const ring = (2 * (size - 1) * count * 2) / size;
      check(plain === 0 && Math.abs(half - ring) <= 16, 'fp16 bytes', `${half} bytes sent with fp16, the ring's ${ring}`);
      return;
    }
    check(plain > 0 && half * 2 === plain, 'fp16 bytes', `${half} bytes sent with fp16, ${plain} without`);
  },
};

export const compressionCases: readonly ConformanceCase[] = [
  exactAllreduce,
  randomAllreduce,
  gatherAndScatter,
  neverMixed,
  syncTwins,
  refused,
  withJoin,
  halfTheBytes,
  ...mismatches,
];
