/**
 * Negotiation: unnamed calls matched by their order, named tensors submitted in a different
 * order on every rank, and mismatches, which reject on every rank with the same error (the
 * ranks compare the messages they got) while the job goes on.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { InvalidArgumentError, MismatchError } from '../../../src/core/errors.js';
import { shuffled } from '../../helpers/shuffle.js';
import { type ConformanceCase, check, checkJson, part, settleAll } from './case.js';

const unnamed: ConformanceCase = {
  name: 'unnamed calls match by their order, per collective, several in flight',
  async run(rr, rank, size) {
    const first = rr.allreduce(new Float64Array([1]));
    const gathered = rr.allgather(new Int32Array([rank]));
    const second = rr.allreduce(new Float64Array([10]));
    const sent = rr.broadcast(new Float32Array([rank, 2]), { root: size - 1 });
    const crossed = rr.barrier();
    const third = rr.allreduce(new Float64Array([100]), { op: 'max' });
    await settleAll([
      part('1st allreduce', async () => checkJson([...(await first)], [size], '1st allreduce')),
      part('2nd allreduce', async () => checkJson([...(await second)], [10 * size], '2nd allreduce')),
      part('3rd allreduce', async () => checkJson([...(await third)], [100], '3rd allreduce')),
      part('allgather', async () => checkJson([...(await gathered)], [...Array(size).keys()], 'allgather')),
      part('broadcast', async () => checkJson([...(await sent)], [size - 1, 2], 'broadcast')),
      part('barrier', () => crossed),
    ]);
  },
};

const named: ConformanceCase = {
  name: '20 named tensors submitted in a different order on every rank',
  async run(rr, rank, size) {
    const names = Array.from({ length: 20 }, (_, i) => `layer${i}/grad`);
    const rankSum = (size * (size - 1)) / 2;
    await settleAll(
      shuffled(names, rank + 7).map((name) =>
        part(name, async () => {
          const i = names.indexOf(name);
          const out = await rr.allreduce(new Float32Array(100 + i).fill(rank + i), { name });
          check(out.length === 100 + i, name, `${out.length} elements`);
          check(
            out.every((v) => v === rankSum + size * i),
            name,
            `${out[0]} != ${rankSum + size * i}`,
          );
        }),
      ),
    );
  },
};

type ErrorClass = typeof MismatchError | typeof InvalidArgumentError;

/**
 * A case where rank size - 1 (only) disagrees: the call rejects on every rank with `kind` and
 * exactly `expected(size)`, every rank has the same message, and the next collective works.
 */
function mismatch(
  what: string,
  kind: ErrorClass,
  expected: (size: number) => string,
  call: (rr: RingReduce, odd: boolean, rank: number, size: number) => Promise<unknown>,
): ConformanceCase {
  return {
    name: `mismatch: ${what} rejects on every rank with the same ${kind.name}; the job goes on`,
    minRanks: 2,
    async run(rr, rank, size) {
      // Every rank makes the same calls whatever happens: the checks come last.
      const outcome = await call(rr, rank === size - 1, rank, size).then(
        () => undefined,
        (error: unknown) => error,
      );
      const message = outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : '';
      const bytes = new TextEncoder().encode(message);
      const lengths = await rr.allgather(new Int32Array([bytes.length]), { name: `mm/${what}/lengths` });
      const gathered = await rr.allgather(bytes, { name: `mm/${what}/messages` });
      const after = await rr.allreduce(new Float64Array([1, 2]), { name: `mm/${what}/after` });

      check(outcome !== undefined, what, 'the call resolved');
      check(outcome instanceof kind, what, `rejected with ${message}`);
      const want = expected(size);
      check(outcome instanceof Error && outcome.message === want, what, `the message is "${message}", not "${want}"`);
      let offset = 0;
      const messages = [...lengths].map((length) => {
        const text = new TextDecoder().decode(gathered.subarray(offset, offset + length));
        offset += length;
        return text;
      });
      const others = messages.flatMap((text, r) => (text === message ? [] : [`rank ${r}: "${text}"`]));
      check(others.length === 0, `${what}: every rank has the same message`, `this rank "${message}", ${others.join(', ')}`);
      checkJson([...after], [size, 2 * size], `${what}: the collective after it`);
    },
  };
}

const mismatches: ConformanceCase[] = [
  mismatch(
    'data types',
    MismatchError,
    (size) => `Mismatched data types for tensor 'mm/dtype': rank 0 has float32, rank ${size - 1} has int32.`,
    (rr, odd) => rr.allreduce(odd ? new Int32Array(4) : new Float32Array(4), { name: 'mm/dtype' }),
  ),
  mismatch(
    'reduce ops',
    MismatchError,
    (size) => `Mismatched reduce ops for tensor 'mm/op': rank 0 has sum, rank ${size - 1} has max.`,
    (rr, odd) => rr.allreduce(new Float32Array(4), { name: 'mm/op', op: odd ? 'max' : 'sum' }),
  ),
  mismatch(
    'shapes',
    MismatchError,
    (size) => `Mismatched shapes for tensor 'mm/shape': rank 0 has [2, 3], rank ${size - 1} has [3, 2].`,
    (rr, odd) => rr.allreduce({ data: new Float32Array(6), shape: odd ? [3, 2] : [2, 3] }, { name: 'mm/shape' }),
  ),
  mismatch(
    'collectives',
    MismatchError,
    (size) =>
      `Mismatched collective operations for tensor 'mm/collective': rank 0 has allreduce, rank ${size - 1} has broadcast.`,
    (rr, odd) =>
      odd
        ? rr.broadcast(new Float32Array(3), { name: 'mm/collective' })
        : rr.allreduce(new Float32Array(3), { name: 'mm/collective' }),
  ),
  mismatch(
    'allgather dimensions',
    MismatchError,
    (size) =>
      `Mismatched allgather dimensions after the first for tensor 'mm/ag-dims': rank 0 has [4], rank ${size - 1} has [5].`,
    (rr, odd) => rr.allgather({ data: new Float32Array(odd ? 5 : 4), shape: [1, odd ? 5 : 4] }, { name: 'mm/ag-dims' }),
  ),
  mismatch(
    "allgather 'out' lengths",
    InvalidArgumentError,
    (size) => {
      const firstDims = Array.from({ length: size }, (_, r) => r + 1);
      const total = 2 * firstDims.reduce((a, b) => a + b, 0);
      return (
        `Wrong 'out' for allgather of tensor 'mm/ag-out': rank ${size - 1}'s has ${total - 2} elements, ` +
        `the result has ${total} (first dimensions [${firstDims.join(', ')}] × 2 elements per row).`
      );
    },
    (rr, odd, rank, size) => {
      // Rows 1, 2, ..., size of 2 elements each; the last rank's 'out' is a row short.
      const total = size * (size + 1);
      const out = new Float32Array(new SharedArrayBuffer(4 * (odd ? total - 2 : total)));
      return rr.allgather({ data: new Float32Array(2 * (rank + 1)), shape: [rank + 1, 2] }, { name: 'mm/ag-out', out });
    },
  ),
  mismatch(
    'broadcast roots',
    MismatchError,
    (size) => `Mismatched broadcast roots for tensor 'mm/root': rank 0 has root 0, rank ${size - 1} has root 1.`,
    (rr, odd) => rr.broadcast(new Float32Array(3), { name: 'mm/root', root: odd ? 1 : 0 }),
  ),
];

export const negotiationCases: readonly ConformanceCase[] = [unnamed, named, ...mismatches];
