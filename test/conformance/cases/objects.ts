/**
 * allgatherObject and broadcastObject: any structured-clone value. Nested objects, Maps, Sets,
 * typed arrays, dates, bigints, strings with non-ASCII characters, values whose size differs per
 * rank (one of 1 MiB), broadcast from every root, named and unnamed calls, a value that cannot
 * be sent (refused at the call), the Sync twins.
 */
import { dequal as isDeepStrictEqual } from 'dequal';
import { type ConformanceCase, check, checkRefused, part, settleAll } from './case.js';

/** Rank `rank`'s value: of every kind structured clone carries, its size growing with the rank. */
function valueOfRank(rank: number): unknown {
  return {
    rank,
    text: `rang ${rank}: Grüße, 日本語, emoji 🚀, ${'é'.repeat(rank * 37)}`,
    // -rank - 1, not -rank: rank 0 would send -0, which arrives as 0 (api/object_codec.ts).
    nested: { deep: { deeper: [rank, null, true, { leaf: -rank - 1 }] }, empty: {} },
    map: new Map<unknown, unknown>([
      ['ranks', rank],
      [rank, ['a', 'b'.repeat(rank)]],
    ]),
    set: new Set([rank, `s${rank}`]),
    floats: Float32Array.from({ length: rank * 100 + 1 }, (_, i) => i / (rank + 1)),
    ints: BigInt64Array.from([BigInt(rank) * 2n ** 60n, -1n]),
    when: new Date(Date.UTC(2024, 0, rank + 1)),
    big: 2n ** 70n + BigInt(rank),
    list: Array.from({ length: rank * 50 }, (_, i) => ({ i, odd: i % 2 === 1 })),
    nothing: undefined,
  };
}

/** Throws unless `actual` equals `expected` deeply (classes, Maps, typed arrays included). */
function checkDeep(actual: unknown, expected: unknown, what: string): void {
  check(isDeepStrictEqual(actual, expected), what, 'differs from the value sent');
}

const allgather: ConformanceCase = {
  name: 'allgatherObject: values of every kind, of a size that differs per rank, in rank order; named and unnamed',
  async run(rr, rank, size) {
    const expected = Array.from({ length: size }, (_, r) => valueOfRank(r));
    await settleAll([
      part('named', async () => {
        const all = await rr.allgatherObject(valueOfRank(rank), { name: 'obj/ag' });
        check(all.length === size, 'named', `${all.length} values`);
        checkDeep(all, expected, 'named');
      }),
      part('unnamed', async () => checkDeep(await rr.allgatherObject(valueOfRank(rank)), expected, 'unnamed')),
      part('a different kind per rank', async () => {
        const kinds = [42, 'text', null, [1, [2]], new Map([[1, new Set([2])]])];
        const all = await rr.allgatherObject(kinds[rank % kinds.length], { name: 'obj/ag-kinds' });
        checkDeep(
          all,
          Array.from({ length: size }, (_, r) => kinds[r % kinds.length]),
          'a different kind per rank',
        );
      }),
      part('1 MiB on the last rank', async () => {
        const big = (r: number) => (r === size - 1 ? 'ü'.repeat(2 ** 19) : `rank ${r}`);
        const all = await rr.allgatherObject(big(rank), { name: 'obj/ag-big' });
        check(
          all.every((v, r) => v === big(r)),
          '1 MiB on the last rank',
          'a value differs',
        );
      }),
    ]);
  },
};

const broadcast: ConformanceCase = {
  name: 'broadcastObject: from every root, values of every kind; the other ranks pass values of other sizes (ignored)',
  async run(rr, rank, size) {
    for (let root = 0; root < size; root++) {
      await settleAll([
        part(`root ${root}`, async () => {
          checkDeep(
            await rr.broadcastObject(valueOfRank(rank), { root, name: `obj/bc/${root}` }),
            valueOfRank(root),
            `root ${root}`,
          );
        }),
        part(`root ${root}, unnamed, undefined on the others`, async () => {
          const got = await rr.broadcastObject(rank === root ? valueOfRank(root) : undefined, { root });
          checkDeep(got, valueOfRank(root), `root ${root}, unnamed`);
        }),
      ]);
    }
    // The default root is 0; a root's own value of a few bytes, and undefined itself.
    checkDeep(await rr.broadcastObject(rank === 0 ? 'ναι' : 'no'), 'ναι', 'the default root');
    checkDeep(await rr.broadcastObject(rank === 0 ? undefined : 1, { name: 'obj/bc-undefined' }), undefined, 'undefined');
  },
};

const refused: ConformanceCase = {
  name: 'allgatherObject/broadcastObject: a value structured clone cannot carry is refused at the call, no rank waits',
  async run(rr, rank, size) {
    if (rank === size - 1) {
      await checkRefused(
        'a symbol',
        'value cannot be sent: value.key is a symbol; object collectives carry structured-clone values, without functions or symbols',
        () => rr.allgatherObject({ key: Symbol('not cloneable') }, { name: 'obj-arg' }),
      );
      await checkRefused(
        'a function',
        'value cannot be sent: value.get("f")[1] is a function; object collectives carry structured-clone values, without functions or symbols',
        () => rr.broadcastObject(new Map([['f', [1, () => 2]]]), { name: 'obj-arg', root: rank }),
      );
      await checkRefused('a root out of range', `option 'root' must be an integer rank in [0, ${size - 1}], got ${size}`, () =>
        rr.broadcastObject(1, { name: 'obj-arg', root: size }),
      );
    }
    // Nothing was made: the names are free, and every rank's proper calls of them work.
    checkDeep(
      await rr.allgatherObject({ rank }, { name: 'obj-arg' }),
      Array.from({ length: size }, (_, r) => ({ rank: r })),
      'the allgather after',
    );
    checkDeep(await rr.broadcastObject([rank], { name: 'obj-arg', root: size - 1 }), [size - 1], 'the broadcast after');
  },
};

const sync: ConformanceCase = {
  name: 'allgatherObjectSync and broadcastObjectSync: values of every kind',
  needsSync: true,
  async run(rr, rank, size) {
    checkDeep(
      rr.allgatherObjectSync(valueOfRank(rank), { name: 'obj-sync/ag' }),
      Array.from({ length: size }, (_, r) => valueOfRank(r)),
      'allgatherObjectSync',
    );
    checkDeep(
      rr.broadcastObjectSync(valueOfRank(rank), { name: 'obj-sync/bc', root: size - 1 }),
      valueOfRank(size - 1),
      'broadcastObjectSync',
    );
  },
};

export const objectCases: readonly ConformanceCase[] = [allgather, broadcast, refused, sync];
