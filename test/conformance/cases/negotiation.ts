/**
 * Negotiation: unnamed calls matched by their order, named tensors submitted in a different
 * order on every rank, calls of every kind (every collective, send/recv, the object ones)
 * submitted in a different order on every rank and all in flight at once, unnamed calls kept in
 * step across calls refused at the call, and mismatches, which reject on every rank with the
 * same error (the ranks compare the messages they got) while the job goes on.
 */
import { dequal as isDeepStrictEqual } from 'dequal';
import type { RingReduce } from '../../../src/api/runtime.js';
import { allocShared } from '../../../src/core/dtypes.js';
import { InvalidArgumentError, MismatchError } from '../../../src/core/errors.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';
import {
  concatenated,
  evenSplits,
  expectedAlltoall,
  offsetsOf,
  referenceAllreduce,
  referenceInput,
  referenceScaledAllreduce,
  rowSlice,
} from '../../helpers/reference.js';
import { shuffled } from '../../helpers/shuffle.js';
import { type ConformanceCase, check, checkArray, checkJson, describeError, errorOf, part, settleAll } from './case.js';

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

export type ErrorClass = typeof MismatchError | typeof InvalidArgumentError;

/**
 * A case where rank size - 1 (only) disagrees: the call rejects on every rank with `kind` and
 * exactly `expected(size)`, every rank has the same message, and the next collective works.
 * The other collectives' files make their mismatch cases with it.
 */
export function mismatch(
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
        const text = new TextDecoder().decode(gathered.slice(offset, offset + length));
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
  mismatch(
    'allreduce prescale',
    MismatchError,
    (size) =>
      `Mismatched scale factors for tensor 'mm/prescale': rank 0 has prescale 1, postscale 1, ` +
      `rank ${size - 1} has prescale 2, postscale 1.`,
    // 8 bytes: the size that takes the eager path unscaled.
    (rr, odd) => rr.allreduce(new Float32Array(2), { name: 'mm/prescale', ...(odd ? { prescale: 2 } : {}) }),
  ),
  mismatch(
    'allreduce postscale',
    MismatchError,
    (size) =>
      `Mismatched scale factors for tensor 'mm/postscale': rank 0 has prescale 1, postscale 0.5, ` +
      `rank ${size - 1} has prescale 1, postscale 0.25.`,
    (rr, odd) => rr.allreduce(new Float64Array(1000), { name: 'mm/postscale', postscale: odd ? 0.25 : 0.5 }),
  ),
  mismatch(
    'bitwise reduce ops',
    MismatchError,
    (size) => `Mismatched reduce ops for tensor 'mm/bitwise': rank 0 has bor, rank ${size - 1} has band.`,
    (rr, odd) => rr.allreduce(new Int32Array(3), { name: 'mm/bitwise', op: odd ? 'band' : 'bor' }),
  ),
];

/** One call of the mixed case: started when `run` is called, which resolves once its result checked out. */
interface MixedCall {
  name: string;
  run: () => Promise<void>;
}

/** Every kind of call, named `mix/<kind>/<round>`, for this rank of a job of `size`; the checks against the references. */
function mixedCalls(rr: RingReduce, rank: number, size: number, round: number): MixedCall[] {
  const calls: MixedCall[] = [];
  const add = (kind: string, run: (name: string) => Promise<void>) => {
    const name = `mix/${kind}/${round}`;
    calls.push({ name, run: () => run(name) });
  };
  const allreduce = (dtype: DType, op: ReduceOp, count: number, scales: { prescale?: number; postscale?: number } = {}) =>
    add(`allreduce ${dtype} ${op} ${count}${scales.prescale ? ' scaled' : ''}`, async (name) => {
      const result = await rr.allreduce(referenceInput(dtype, rank, count, op).slice(), { name, op, ...scales });
      const expected = scales.prescale
        ? referenceScaledAllreduce(dtype, op, count, size, scales.prescale, scales.postscale ?? 1)
        : referenceAllreduce(dtype, op, count, size);
      checkArray(dtype, result, expected, name);
    });
  allreduce('float32', 'sum', 100 + round);
  allreduce('uint8', 'max', 1);
  allreduce('int32', 'bxor', 33);
  allreduce('int64', 'band', 9);
  allreduce('float64', 'average', 10, { prescale: 0.5, postscale: 4 });

  const rowsOf = (r: number) => (r + round) % 3;
  add('allgather', async (name) => {
    const inputs = Array.from({ length: size }, (_, r) => referenceInput('int16', r, rowsOf(r) * 2, 'sum'));
    const result = await rr.allgather({ data: (inputs[rank] as TypedArray).slice(), shape: [rowsOf(rank), 2] }, { name });
    checkArray('int16', result.data, concatenated('int16', inputs), name);
  });
  add('broadcast', async (name) => {
    const root = (size - 1 + round) % size;
    const result = await rr.broadcast(referenceInput('uint32', rank, 50, 'sum').slice(), { name, root });
    checkArray('uint32', result, referenceInput('uint32', root, 50, 'sum'), name);
  });
  add('barrier', (name) => rr.barrier({ name }));
  add('reducescatter', async (name) => {
    const rows = 2 * size + 1;
    const result = await rr.reducescatter(
      { data: referenceInput('float32', rank, rows * 2, 'sum').slice(), shape: [rows, 2] },
      { name },
    );
    const splits = evenSplits(rows, size);
    const whole = referenceAllreduce('float32', 'sum', rows * 2, size);
    checkArray('float32', result.data, rowSlice(whole, offsetsOf(splits)[rank] as number, splits[rank] as number, 2), name);
  });
  add('alltoall', async (name) => {
    const splits = Array.from({ length: size }, (_, from) =>
      Array.from({ length: size }, (_, to) => (from + 2 * to + round) % 3),
    );
    const inputs = splits.map((s, r) => referenceInput('int32', r, s.reduce((a, b) => a + b, 0) * 2, 'sum'));
    const mine = (inputs[rank] as TypedArray).slice();
    const { output } = await rr.alltoall({ data: mine, shape: [mine.length / 2, 2] }, { name, splits: splits[rank] as number[] });
    checkArray('int32', output.data, expectedAlltoall('int32', inputs, splits, 2, rank), name);
  });
  add('reduce', async (name) => {
    const root = (1 + round) % size;
    const result = await rr.reduce(referenceInput('int64', rank, 20, 'band').slice(), { name, root, op: 'band' });
    if (rank !== root) check(result === null, name, 'a non-root got a result');
    else checkArray('int64', result as TypedArray, referenceAllreduce('int64', 'band', 20, size), name);
  });
  add('gather', async (name) => {
    const root = (size - 1 + 2 * round) % size;
    const inputs = Array.from({ length: size }, (_, r) => referenceInput('float64', r, rowsOf(r) * 3, 'sum'));
    const result = await rr.gather({ data: (inputs[rank] as TypedArray).slice(), shape: [rowsOf(rank), 3] }, { name, root });
    if (rank !== root) check(result === null, name, 'a non-root got a result');
    else checkArray('float64', result?.data as TypedArray, concatenated('float64', inputs), name);
  });
  add('scatter', async (name) => {
    const root = round % size;
    const rows = 2 * size + 1;
    const input = referenceInput('uint16', root, rows, 'sum');
    const result = await rr.scatter(rank === root ? input.slice() : null, { name, root });
    const splits = evenSplits(rows, size);
    checkArray('uint16', result.data, rowSlice(input, offsetsOf(splits)[rank] as number, splits[rank] as number, 1), name);
  });
  add('allgatherObject', async (name) => {
    const valueOfRank = (r: number) => ({ rank: r, map: new Map([[r, 'ü'.repeat(r + round)]]) });
    const all = await rr.allgatherObject(valueOfRank(rank), { name });
    check(
      isDeepStrictEqual(
        all,
        Array.from({ length: size }, (_, r) => valueOfRank(r)),
      ),
      name,
      'the values differ',
    );
  });
  add('broadcastObject', async (name) => {
    const root = (round + 1) % size;
    const valueOfRank = (r: number) => ({ root: r, data: new Float32Array([r, round]) });
    check(
      isDeepStrictEqual(await rr.broadcastObject(valueOfRank(rank), { name, root }), valueOfRank(root)),
      name,
      'the value differs',
    );
  });
  if (size > 1) {
    add('send/recv', async (name) => {
      const tag = 600 + round;
      const [, got] = await Promise.all([
        rr.send(Float32Array.from([rank, round]), { to: (rank + 1) % size, tag }),
        rr.recv(new Float32Array(2), { from: (rank + size - 1) % size, tag }),
      ]);
      checkJson([...got], [(rank + size - 1) % size, round], name);
    });
  }
  return calls;
}

const mixed: ConformanceCase = {
  name: 'every kind of call (allreduce plain, bitwise and scaled, allgather, broadcast, barrier, reducescatter, alltoall, reduce, gather, scatter, send/recv, the object ones), 3 rounds, in a different order on every rank, all in flight',
  async run(rr, rank, size) {
    const calls = [0, 1, 2].flatMap((round) => mixedCalls(rr, rank, size, round));
    await settleAll(shuffled(calls, rank * 7919 + 13).map((c) => part(c.name, c.run)));
  },
};

/**
 * Unnamed calls refused at the call: per collective, one unnamed call that every rank makes and
 * that fails with a mismatch (its message names it), then the refused calls, then the
 * mismatching call again. The refused calls made nothing, so the two names must be consecutive:
 * a refused call that used up an unnamed name would put a rank that made it (and not the others)
 * out of step for good. Every rank makes the same number of each, so the ranks stay in step
 * whatever the library does.
 */
interface UnnamedProbe {
  op: string;
  mismatched: (rr: RingReduce, odd: boolean, rank: number, size: number) => Promise<unknown>;
  refused: (rr: RingReduce, rank: number, size: number) => Array<() => Promise<unknown>>;
}

const kProbes: readonly UnnamedProbe[] = [
  {
    op: 'allreduce',
    mismatched: (rr, odd) => rr.allreduce(new Float32Array(odd ? 2 : 1)),
    refused: (rr) => [
      () => rr.allreduce(new Float32Array(1), { op: 'bor' }),
      () => rr.allreduce(new Int32Array(1), { prescale: 2 }),
      () => rr.allreduce(new Int32Array(1), { postscale: 2 }),
    ],
  },
  {
    op: 'allgather',
    mismatched: (rr, odd) => rr.allgather({ data: new Float32Array(odd ? 2 : 1), shape: [1, odd ? 2 : 1] }),
    refused: (rr) => [() => rr.allgather(new Float32Array(1), { out: allocShared('int8', 1) as never })],
  },
  {
    op: 'broadcast',
    mismatched: (rr, odd) => rr.broadcast(new Float32Array(1), { root: odd ? 1 : 0 }),
    refused: (rr, _rank, size) => [() => rr.broadcast(new Float32Array(1), { root: size })],
  },
  {
    op: 'reducescatter',
    mismatched: (rr, odd) => rr.reducescatter(new Float32Array(odd ? 2 : 1)),
    refused: (rr) => [
      () => rr.reducescatter(new Int16Array(1), { prescale: 2 }),
      () => rr.reducescatter(new Float32Array(1), { op: 'bxor' }),
    ],
  },
  {
    op: 'alltoall',
    mismatched: (rr, odd, _rank, size) =>
      rr.alltoall({ data: new Float32Array(size * (odd ? 2 : 1)), shape: [size, odd ? 2 : 1] }),
    refused: (rr, _rank, size) => [() => rr.alltoall(new Float32Array(size), { splits: new Array(size).fill(2) })],
  },
  {
    op: 'reduce',
    mismatched: (rr, odd) => rr.reduce(new Float32Array(1), { root: odd ? 1 : 0 }),
    refused: (rr, _rank, size) => [
      () => rr.reduce(new Float32Array(1), { root: size }),
      () => rr.reduce(new Float64Array(1), { op: 'band' }),
    ],
  },
  {
    op: 'gather',
    mismatched: (rr, odd) => rr.gather(new Float32Array(1), { root: odd ? 1 : 0 }),
    refused: (rr, _rank, size) => [() => rr.gather(new Float32Array(1), { root: size })],
  },
  {
    op: 'scatter',
    mismatched: (rr, odd, rank) => {
      const root = odd ? 1 : 0;
      return rr.scatter(rank === root ? new Float32Array(2) : null, { root });
    },
    // Two on every rank: the root's mistakes on rank 0, a non-root's on the others.
    refused: (rr, rank, size) =>
      rank === 0
        ? [() => rr.scatter(null), () => rr.scatter(new Float32Array(1), { splits: new Array(size).fill(1) })]
        : [() => rr.scatter(new Float32Array(1)), () => rr.scatter(null, { splits: new Array(size).fill(0) })],
  },
];

/** The tensor name a mismatch message names. */
function nameIn(error: unknown): string | undefined {
  return error instanceof MismatchError ? /tensor '([^']+)'/.exec(error.message)?.[1] : undefined;
}

const unnamedRefused: ConformanceCase = {
  name: 'unnamed calls refused at the call use up no name: the unnamed calls around them stay consecutive, every collective',
  minRanks: 2,
  async run(rr, rank, size) {
    const failures: string[] = [];
    for (const probe of kProbes) {
      const odd = rank === size - 1;
      const before = nameIn(await errorOf(() => probe.mismatched(rr, odd, rank, size)));
      const refused = probe.refused(rr, rank, size);
      const errors = [];
      for (const call of refused) errors.push(await errorOf(call));
      const after = nameIn(await errorOf(() => probe.mismatched(rr, odd, rank, size)));

      const wrong = errors.filter((e) => !(e instanceof InvalidArgumentError));
      if (wrong.length > 0) failures.push(`${probe.op}: a call to refuse ended with ${wrong.map(describeError).join(', ')}`);
      const number = (name: string | undefined) => Number(name?.slice(probe.op.length + 1));
      if (before === undefined || after === undefined || !before.startsWith(`${probe.op}#`)) {
        failures.push(`${probe.op}: the mismatching unnamed calls did not fail with a MismatchError naming them`);
      } else if (number(after) !== number(before) + 1) {
        failures.push(`${probe.op}: '${before}' before ${refused.length} refused calls, '${after}' after`);
      }
    }
    check(
      failures.length === 0,
      'refused calls used up unnamed names (a rank that made one, unlike the others, would be out of step for good)',
      failures.join('; '),
    );
  },
};

export const negotiationCases: readonly ConformanceCase[] = [unnamed, named, mixed, unnamedRefused, ...mismatches];
