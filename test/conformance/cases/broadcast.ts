/** Broadcast: from every root, every dtype, every length the issue names, inputs untouched, in place, the Sync twin. */
import { allocShared, kDTypes } from '../../../src/core/dtypes.js';
import { referenceInput } from '../../helpers/reference.js';
import { type ConformanceCase, check, checkArray, checkJson, edgeCounts, part, settleAll } from './case.js';

const everyRoot: ConformanceCase = {
  name: 'broadcast: from every root, every dtype, 1001 elements; no input modified',
  async run(rr, rank, size) {
    for (let root = 0; root < size; root++) {
      await settleAll(
        kDTypes.map((dtype) => {
          const name = `bc/${dtype}/root ${root}`;
          return part(name, async () => {
            const reference = referenceInput(dtype, rank, 1001, 'sum');
            const mine = reference.slice();
            const result = await rr.broadcast(mine, { root, name });
            checkArray(dtype, result, referenceInput(dtype, root, 1001, 'sum'), name);
            checkArray(dtype, mine, reference, `${name}: the input was modified`);
          });
        }),
      );
    }
  },
};

const everyLength: ConformanceCase = {
  name: 'broadcast: every dtype, counts 0, 1, N-1, N, N+1, 1000, the root going round the ranks, all in flight at once',
  async run(rr, rank, size) {
    const counts = edgeCounts(size);
    await settleAll(
      counts.flatMap((count, c) =>
        kDTypes.map((dtype, i) => {
          const root = (c + i) % size;
          const name = `bc/${dtype}/${count}/root ${root}`;
          return part(name, async () => {
            const result = await rr.broadcast(referenceInput(dtype, rank, count, 'sum').slice(), { root, name });
            checkArray(dtype, result, referenceInput(dtype, root, count, 'sum'), name);
          });
        }),
      ),
    );
  },
};

const inPlace: ConformanceCase = {
  name: "broadcast in place ('out' the tensor itself) from the last rank: every dtype, 2^18 elements",
  async run(rr, rank, size) {
    const root = size - 1;
    await settleAll(
      kDTypes.map((dtype) =>
        part(`in-place ${dtype}`, async () => {
          const input = referenceInput(dtype, rank, 2 ** 18, 'sum');
          const buffer = allocShared(dtype, input.length);
          buffer.set(input as never);
          const result = await rr.broadcast(buffer, { root, name: `bc/in-place/${dtype}`, out: buffer });
          check(result === buffer, `in-place ${dtype}`, 'the result is not the tensor itself');
          checkArray(dtype, result, referenceInput(dtype, root, 2 ** 18, 'sum'), `in-place ${dtype}`);
        }),
      ),
    );
  },
};

const shaped: ConformanceCase = {
  name: 'broadcast: { data, shape } in gives { data, shape } out; the root defaults to 0',
  async run(rr, rank) {
    const result = await rr.broadcast({ data: new Int8Array([rank, -rank, 3]), shape: [3, 1] }, { name: 'bc/shaped' });
    checkJson(result.shape, [3, 1], 'the shape');
    check(result.data instanceof Int8Array, 'the data', `is a ${result.data.constructor.name}`);
    checkJson([...result.data], [0, 0, 3], "the values (root 0's)");
  },
};

const sync: ConformanceCase = {
  name: 'broadcastSync: from the last rank',
  needsSync: true,
  async run(rr, rank, size) {
    const result = rr.broadcastSync(new Uint8Array([rank, rank + 1]), { root: size - 1, name: 'bc-sync' });
    checkJson([...result], [size - 1, size], 'the values');
  },
};

export const broadcastCases: readonly ConformanceCase[] = [everyRoot, everyLength, inPlace, shaped, sync];
