/**
 * Allreduce: every dtype and op (the bitwise ones on integers) at every count the issue names,
 * in place, the kind of the result, prescale/postscale, argument errors, the Sync twin.
 */

import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, bytesPerElement, kDTypes } from '../../../src/core/dtypes.js';
import type { DType, ReduceOp } from '../../../src/core/types.js';
import { eagerMaxBytes } from '../../../src/engine/ops/op_spec.js';
import { referenceAllreduce, referenceInput, referenceScaledAllreduce } from '../../helpers/reference.js';
import {
  type ConformanceCase,
  check,
  checkArray,
  checkJson,
  checkRefused,
  edgeCounts,
  kBitwiseOps,
  kCombos,
  opsFor,
  part,
  settleAll,
} from './case.js';

/**
 * The large count: 2^20 elements, plus 3 so that the pieces every backend cuts it into (ring
 * chunks per rank, pipeline segments, the MPI addon's 2 MiB reductions) end in a partial one.
 */
export const kLargeCount = 2 ** 20 + 3;

/** One allreduce of every rank's reference input; checks the result and that the input is untouched. */
async function allreduceOnce(
  rr: RingReduce,
  rank: number,
  size: number,
  dtype: DType,
  op: ReduceOp,
  count: number,
  name = `ar/${dtype}/${op}/${count}`,
) {
  await part(name, async () => {
    const reference = referenceInput(dtype, rank, count, op);
    const mine = reference.slice();
    const result = await rr.allreduce(mine, { name, op });
    checkArray(dtype, result, referenceAllreduce(dtype, op, count, size), name);
    checkArray(dtype, mine, reference, `${name}: the input was modified`);
  });
}

const smallCounts: ConformanceCase = {
  name: 'allreduce: every dtype and op, counts 0, 1, N-1, N, N+1, 1000, all in flight at once',
  async run(rr, rank, size) {
    const counts = edgeCounts(size);
    await settleAll(counts.flatMap((count) => kCombos.map(({ dtype, op }) => allreduceOnce(rr, rank, size, dtype, op, count))));
  },
};

/**
 * A cached allreduce of at most eagerMaxBytes(size) rides with its ready report and is reduced on every
 * rank locally (engine/ready/eager_exchange.ts); one element more takes an algorithm, and so do
 * eager-sized ones submitted together past that limit (their reports withhold the data: they run
 * fused). Each name runs twice: through rank 0 (all at once), then agreed in a ready round, where
 * the tensors at the limit go one at a time (each report carries one) and those one element past
 * it, and half-limit ones, all at once. Every dtype (its element size sets the count at the limit) with sum, and
 * every op of float32 and int32: the reductions themselves are the same code at every count
 * (the small-count case above runs them all).
 */
const aroundEagerLimit: ConformanceCase = {
  name: 'allreduce, cached: every dtype at the eager limit, one element past it and in a burst, and every op of float32 and int32',
  async run(rr, rank, size) {
    const combos = kCombos.filter(({ dtype, op }) => op === 'sum' || dtype === 'float32' || dtype === 'int32');
    const atLimit = (dtype: DType) => Math.max(1, Math.floor(eagerMaxBytes(size) / bytesPerElement(dtype)));
    const once = (dtype: DType, op: ReduceOp, count: number) =>
      allreduceOnce(rr, rank, size, dtype, op, count, `ar-eager/${dtype}/${op}/${count}`);
    // Distinct (a job of one has no eager limit: 1 stands in, and half of it is 1 again).
    const counts = (dtype: DType) => [...new Set([atLimit(dtype), atLimit(dtype) + 1, Math.ceil(atLimit(dtype) / 2)])];
    await settleAll(combos.flatMap(({ dtype, op }) => counts(dtype).map((count) => once(dtype, op, count))));
    for (const { dtype, op } of combos) await once(dtype, op, atLimit(dtype));
    await settleAll(
      combos.flatMap(({ dtype, op }) =>
        counts(dtype)
          .filter((count) => count !== atLimit(dtype))
          .map((count) => once(dtype, op, count)),
      ),
    );
  },
};

/**
 * The ops of `dtype` at the large count: every op but the bitwise ones, and one bitwise op per
 * integer dtype, going round them (band and bor meet a 64-bit dtype here, bxor in the
 * reducescatter cases' large counts). All three at every
 * large count cost some 30 s more over the in-process worlds (the 64-bit references are BigInt),
 * over the budget of the conformance tier; the small counts take every op on every dtype.
 */
function largeOpsFor(dtype: DType): ReduceOp[] {
  const ints = kDTypes.filter((d) => !opsFor(d).includes('average'));
  const bitwise = kBitwiseOps[ints.indexOf(dtype) % kBitwiseOps.length];
  return opsFor(dtype).filter((op) => !kBitwiseOps.includes(op) || op === bitwise);
}

/** One case per dtype: its large-count ops (largeOpsFor), one after the other. */
const largeCounts: ConformanceCase[] = kDTypes.map((dtype) => ({
  name: `allreduce: ${dtype}, ${largeOpsFor(dtype).join(', ')}, 2^20 + 3 elements`,
  async run(rr, rank, size) {
    for (const op of largeOpsFor(dtype)) await allreduceOnce(rr, rank, size, dtype, op, kLargeCount);
  },
}));

const inPlace: ConformanceCase = {
  name: "allreduce in place ('out' the tensor itself): every dtype, 2^18 elements",
  async run(rr, rank, size) {
    await settleAll(
      kDTypes.map((dtype) =>
        part(`in-place ${dtype}`, async () => {
          const input = referenceInput(dtype, rank, 2 ** 18, 'sum');
          const buffer = allocShared(dtype, input.length);
          buffer.set(input as never);
          const result = await rr.allreduce(buffer, { name: `ar/in-place/${dtype}`, out: buffer });
          check(result === buffer, `in-place ${dtype}`, 'the result is not the tensor itself');
          checkArray(dtype, result, referenceAllreduce(dtype, 'sum', 2 ** 18, size), `in-place ${dtype}`);
        }),
      ),
    );
  },
};

const resultKind: ConformanceCase = {
  name: 'allreduce: the result keeps the kind of the input (typed array or { data, shape }, its class)',
  async run(rr, _rank, size) {
    const shaped = await rr.allreduce({ data: new Int16Array([1, 2, 3, 4]), shape: [2, 2] }, { name: 'ar/kind/shaped' });
    checkJson(shaped.shape, [2, 2], 'shaped: the shape');
    check(shaped.data instanceof Int16Array, 'shaped: the data', `is a ${shaped.data.constructor.name}`);
    checkJson(
      [...shaped.data],
      [1, 2, 3, 4].map((v) => v * size),
      'shaped: the values',
    );
    const plain = await rr.allreduce(new Uint32Array([7, 8]), { name: 'ar/kind/plain', op: 'max' });
    check(plain instanceof Uint32Array, 'typed array: the result', `is a ${plain.constructor.name}`);
    checkJson([...plain], [7, 8], 'typed array: the values');
  },
};

const sync: ConformanceCase = {
  name: 'allreduceSync: int64 beyond 2^53, float32 average, with and without a shape',
  needsSync: true,
  async run(rr, rank, size) {
    const rankSum = (size * (size - 1)) / 2;
    const big = rr.allreduceSync(new BigInt64Array([2n ** 60n + BigInt(rank)]), { name: 'ar-sync/int64' });
    check(big instanceof BigInt64Array, 'int64', `is a ${big.constructor.name}`);
    check(big[0] === BigInt(size) * 2n ** 60n + BigInt(rankSum), 'int64', `${big[0]}`);
    const avg = rr.allreduceSync({ data: new Float32Array([rank, 1]), shape: [1, 2] }, { name: 'ar-sync/avg', op: 'average' });
    checkJson(avg.shape, [1, 2], 'average: the shape');
    checkJson([...avg.data], [rankSum / size, 1], 'average: the values');
  },
};

const kScaleSets: ReadonlyArray<{ prescale?: number; postscale?: number }> = [
  { prescale: 0.5, postscale: 3 },
  { prescale: -1.25 },
  { postscale: 0.1 },
];

const scaled: ConformanceCase = {
  name: 'allreduce: prescale and postscale, float32 and float64, every op, 1 (eager-sized), N+1 and 1000 elements; in place',
  async run(rr, rank, size) {
    const all: Promise<void>[] = [];
    for (const dtype of ['float32', 'float64'] as const) {
      for (const op of opsFor(dtype)) {
        for (const count of [...new Set([1, size + 1, 1000])]) {
          for (const [i, scales] of kScaleSets.entries()) {
            const name = `ar-scaled/${dtype}/${op}/${count}/${i}`;
            // The last set in place: the scaling happens in the caller's own memory.
            const inPlace = i === kScaleSets.length - 1;
            all.push(
              part(name, async () => {
                const reference = referenceInput(dtype, rank, count, op);
                const mine = inPlace ? allocShared(dtype, count) : reference.slice();
                if (inPlace) mine.set(reference as never);
                const result = await rr.allreduce(mine, inPlace ? { name, op, out: mine, ...scales } : { name, op, ...scales });
                const expected = referenceScaledAllreduce(dtype, op, count, size, scales.prescale ?? 1, scales.postscale ?? 1);
                checkArray(dtype, result, expected, name);
                if (inPlace) check(result === mine, `${name}: in place`, 'the result is not the tensor itself');
                else checkArray(dtype, mine, reference, `${name}: the input was modified`);
              }),
            );
          }
        }
      }
    }
    await settleAll(all);
  },
};

/**
 * A burst of tensors from a few elements to past 64 KiB (kOwnMemoryMinBytes), submitted together
 * so that they run fused: packed into one buffer, or, on a backend that reduces several buffers in
 * one submission (the MPI addon's allreduceEach), the large ones each in their own memory and the
 * small ones packed. Every result lands in its own tensor, in place or not, scaled or not.
 */
const fusedMixedSizes: ConformanceCase = {
  name: 'allreduce, fused: a burst of small and large tensors (sum, average, max; scaled; in place), each result its own',
  async run(rr, rank, size) {
    const counts = [3, 40_000, 17, 16_384, 70_001, 16_383, 1];
    const bursts: ReadonlyArray<{ dtype: DType; op: ReduceOp; scales?: { prescale: number; postscale: number } }> = [
      { dtype: 'float32', op: 'sum' },
      { dtype: 'float64', op: 'average' },
      { dtype: 'int32', op: 'max' },
      { dtype: 'float32', op: 'sum', scales: { prescale: 0.5, postscale: 3 } },
    ];
    for (const [b, { dtype, op, scales }] of bursts.entries()) {
      await settleAll(
        counts.map((count, i) => {
          const name = `ar-fused/${b}/${dtype}/${op}/${count}`;
          const inPlace = i % 2 === 1;
          return part(name, async () => {
            const reference = referenceInput(dtype, rank, count, op);
            const mine = inPlace ? allocShared(dtype, count) : reference.slice();
            if (inPlace) mine.set(reference as never);
            const result = await rr.allreduce(mine, { name, op, ...(inPlace ? { out: mine } : {}), ...scales });
            const expected = scales
              ? referenceScaledAllreduce(dtype, op, count, size, scales.prescale, scales.postscale)
              : referenceAllreduce(dtype, op, count, size);
            checkArray(dtype, result, expected, name);
            if (inPlace) check(result === mine, `${name}: in place`, 'the result is not the tensor itself');
            else checkArray(dtype, mine, reference, `${name}: the input was modified`);
          });
        }),
      );
    }
  },
};

const refused: ConformanceCase = {
  name: 'allreduce: argument errors at the call (bitwise ops on floats, scale factors on integers or not finite), no rank waits',
  async run(rr, rank, size) {
    if (rank === size - 1) {
      for (const op of ['band', 'bor', 'bxor'] as const) {
        for (const dtype of ['float32', 'float64'] as const) {
          await checkRefused(
            `${op} on ${dtype}`,
            `option 'op' is '${op}' but the tensor is ${dtype}: bitwise ops need an integer dtype`,
            () => rr.allreduce(allocShared(dtype, 2), { name: 'ar-arg', op }),
          );
        }
      }
      await checkRefused('prescale on int8', "option 'prescale' needs a float tensor, got int8", () =>
        rr.allreduce(new Int8Array(2), { name: 'ar-arg', prescale: 2 }),
      );
      await checkRefused('postscale on uint32', "option 'postscale' needs a float tensor, got uint32", () =>
        rr.allreduce(new Uint32Array(2), { name: 'ar-arg', postscale: 2 }),
      );
      await checkRefused('an infinite postscale', "option 'postscale' must be a finite number, got null", () =>
        rr.allreduce(new Float32Array(2), { name: 'ar-arg', postscale: Number.POSITIVE_INFINITY }),
      );
      await checkRefused('a NaN prescale', "option 'prescale' must be a finite number, got null", () =>
        rr.allreduce(new Float32Array(2), { name: 'ar-arg', prescale: Number.NaN }),
      );
    }
    // Nothing was made: the name is free, and every rank's proper call of it works.
    const result = await rr.allreduce(new Uint8Array([1 << (rank % 8), 0xff]), { name: 'ar-arg', op: 'bor' });
    const bits = Array.from({ length: size }, (_, r) => 1 << (r % 8)).reduce((a, b) => a | b, 0);
    checkJson([...result], [bits, 0xff], 'the call after the refused ones');
  },
};

const syncNew: ConformanceCase = {
  name: 'allreduceSync: int64 bxor and band beyond 2^53, float64 sum with prescale and postscale',
  needsSync: true,
  async run(rr, rank, size) {
    const mine = 2n ** 62n + (1n << BigInt(rank + 3)) + 5n;
    const all = Array.from({ length: size }, (_, r) => 2n ** 62n + (1n << BigInt(r + 3)) + 5n);
    const xor = rr.allreduceSync(new BigInt64Array([mine]), { name: 'ar-sync/bxor', op: 'bxor' });
    check(
      xor[0] ===
        BigInt.asIntN(
          64,
          all.reduce((a, b) => a ^ b),
        ),
      'bxor',
      `${xor[0]}`,
    );
    const and = rr.allreduceSync({ data: new BigUint64Array([mine]), shape: [1] }, { name: 'ar-sync/band', op: 'band' });
    check(and.data[0] === all.reduce((a, b) => a & b), 'band', `${and.data[0]}`);
    const scaledSum = rr.allreduceSync(new Float64Array([rank, 1]), { name: 'ar-sync/scaled', prescale: 2, postscale: 0.25 });
    checkJson([...scaledSum], [(size * (size - 1)) / 4, size / 2], 'scaled sum');
  },
};

/**
 * A training loop's calls: the same name on the same arrays with a fresh options object of the
 * same values every step, so later calls reuse the first one's checks (api/repeats.ts). Each step
 * must still reduce that step's input; a step that changes an option, the output, or the input
 * (a growable buffer's view that grew) is a new call, and the next step repeats that one.
 */
const repeated: ConformanceCase = {
  name: 'allreduce repeated on the same arrays (a training loop): every step reduces its own input; a changed option, output or length is honoured',
  async run(rr, rank, size) {
    const sumOf = (step: number) => (size * (size - 1)) / 2 + size * step;
    const input = new Float32Array(5);
    const out = allocShared('float32', 5);
    const other = allocShared('float32', 5);
    for (let step = 0; step < 7; step++) {
      input.fill(rank + step);
      const max = step === 2 || step === 3;
      const target = step === 4 ? other : out;
      const options = max ? { name: 'ar/repeat', out: target, op: 'max' as const } : { name: 'ar/repeat', out: target };
      const result = await rr.allreduce(input, options);
      check(result === target, `step ${step}`, 'the result is not the given output');
      checkArray('float32', result, new Float32Array(5).fill(max ? size - 1 + step : sumOf(step)), `step ${step}`);
    }
    // In place on a view that follows a growable buffer: after it grows, the same objects are a longer tensor.
    const growable = new (SharedArrayBuffer as unknown as GrowableShared)(4 * 4, { maxByteLength: 8 * 4 });
    const tracking = new Float32Array(growable);
    for (let step = 0; step < 6; step++) {
      if (step === 3) growable.grow(8 * 4);
      tracking.fill(rank + step);
      const result = await rr.allreduce(tracking, { name: 'ar/repeat-grows', out: tracking });
      check(result === tracking && result.length === (step < 3 ? 4 : 8), `in place, step ${step}`, `length ${result.length}`);
      checkArray('float32', result, new Float32Array(result.length).fill(sumOf(step)), `in place, step ${step}`);
    }
  },
};

/** A growable SharedArrayBuffer's constructor (ES2024; this project's lib is older). */
type GrowableShared = new (
  byteLength: number,
  options: { maxByteLength: number },
) => SharedArrayBuffer & { grow(byteLength: number): void };

export const allreduceCases: readonly ConformanceCase[] = [
  smallCounts,
  aroundEagerLimit,
  ...largeCounts,
  inPlace,
  repeated,
  resultKind,
  scaled,
  fusedMixedSizes,
  refused,
  sync,
  syncNew,
];
