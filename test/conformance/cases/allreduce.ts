/** Allreduce: every dtype and op at every count the issue names, in place, the kind of the result, the Sync twin. */

import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import type { DType, ReduceOp } from '../../../src/core/types.js';
import { referenceAllreduce, referenceInput } from '../../helpers/reference.js';
import { type ConformanceCase, check, checkArray, checkJson, kCombos, opsFor, part, settleAll } from './case.js';

/**
 * The large count: 2^20 elements, plus 3 so that the pieces every backend cuts it into (ring
 * chunks per rank, pipeline segments, the MPI addon's 2 MiB reductions) end in a partial one.
 */
export const kLargeCount = 2 ** 20 + 3;

/** One allreduce of every rank's reference input; checks the result and that the input is untouched. */
async function allreduceOnce(rr: RingReduce, rank: number, size: number, dtype: DType, op: ReduceOp, count: number) {
  const name = `ar/${dtype}/${op}/${count}`;
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
    const counts = [...new Set([0, 1, Math.max(0, size - 1), size, size + 1, 1000])];
    await settleAll(counts.flatMap((count) => kCombos.map(({ dtype, op }) => allreduceOnce(rr, rank, size, dtype, op, count))));
  },
};

/** One case per dtype: every op at the large count, one after the other. */
const largeCounts: ConformanceCase[] = kDTypes.map((dtype) => ({
  name: `allreduce: ${dtype}, every op, 2^20 + 3 elements`,
  async run(rr, rank, size) {
    for (const op of opsFor(dtype)) await allreduceOnce(rr, rank, size, dtype, op, kLargeCount);
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

export const allreduceCases: readonly ConformanceCase[] = [smallCounts, ...largeCounts, inPlace, resultKind, sync];
