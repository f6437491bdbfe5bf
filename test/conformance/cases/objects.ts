/**
 * allgatherObject, broadcastObject, gatherObject and scatterObject: any structured-clone value. Nested objects, Maps, Sets,
 * typed arrays, dates, bigints, strings with non-ASCII characters, values whose size differs per
 * rank (one of 1 MiB), broadcast, gather and scatter from every root, named and unnamed calls, a value that cannot
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

const gather: ConformanceCase = {
  name: 'gatherObject: to every root, values of every kind and size in rank order on the root, null elsewhere; named and unnamed',
  async run(rr, rank, size) {
    const expected = Array.from({ length: size }, (_, r) => valueOfRank(r));
    await settleAll(
      Array.from({ length: size }, (_, root) =>
        part(`root ${root}`, async () => {
          const got = await rr.gatherObject(valueOfRank(rank), { root, name: `obj/ga/${root}` });
          if (rank === root) checkDeep(got, expected, `root ${root}`);
          else check(got === null, `root ${root}`, `rank ${rank} got ${typeof got}, not null`);
        }),
      ),
    );
    const unnamed = await rr.gatherObject(rank === 0 ? undefined : [rank]);
    if (rank === 0) checkDeep(unnamed, [undefined, ...Array.from({ length: size - 1 }, (_, r) => [r + 1])], 'the default root');
    else check(unnamed === null, 'the default root', `rank ${rank} got ${typeof unnamed}, not null`);
  },
};

const scatter: ConformanceCase = {
  name: "scatterObject: from every root, rank r gets the root's values[r] (every kind and size); the others' values are ignored",
  async run(rr, rank, size) {
    const values = Array.from({ length: size }, (_, r) => valueOfRank(r));
    await settleAll(
      Array.from({ length: size }, (_, root) =>
        part(`root ${root}`, async () => {
          // Off the root: null, or a list of the wrong length, which is not read.
          const mine = rank === root ? values : rank % 2 === 0 ? null : ['ignored'];
          checkDeep(await rr.scatterObject(mine, { root, name: `obj/sc/${root}` }), valueOfRank(rank), `root ${root}`);
        }),
      ),
    );
    const unnamed = await rr.scatterObject(rank === 0 ? Array.from({ length: size }, (_, r) => `für ${r}`) : null);
    checkDeep(unnamed, `für ${rank}`, 'the default root');
  },
};

const refused: ConformanceCase = {
  name: 'object collectives: a value structured clone cannot carry, a bad root, the wrong number of values to scatter: refused at the call, no rank waits',
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
      await checkRefused('a gather root out of range', `option 'root' must be an integer rank in [0, ${size - 1}], got -1`, () =>
        rr.gatherObject(1, { name: 'obj-arg/ga', root: -1 }),
      );
      await checkRefused(
        'one value too many on the root',
        `scatterObject: values must be an array of ${size} values on the root (rank ${rank}), one for each rank, got an array of ${size + 1}`,
        () => rr.scatterObject(new Array(size + 1).fill(0), { name: 'obj-arg/sc', root: rank }),
      );
      await checkRefused(
        'a Set on the root',
        `scatterObject: values must be an array of ${size} values on the root (rank ${rank}), one for each rank, got Set`,
        () => rr.scatterObject(new Set([1]) as unknown as number[], { name: 'obj-arg/sc', root: rank }),
      );
      await checkRefused(
        'a symbol among the values',
        'values[0] cannot be sent: values[0].s is a symbol; object collectives carry structured-clone values, without functions or symbols',
        () => rr.scatterObject([{ s: Symbol('x') }, ...new Array(size - 1).fill(0)], { name: 'obj-arg/sc', root: rank }),
      );
    }
    // Nothing was made: the names are free, and every rank's proper calls of them work.
    checkDeep(
      await rr.allgatherObject({ rank }, { name: 'obj-arg' }),
      Array.from({ length: size }, (_, r) => ({ rank: r })),
      'the allgather after',
    );
    checkDeep(await rr.broadcastObject([rank], { name: 'obj-arg', root: size - 1 }), [size - 1], 'the broadcast after');
    const gathered = await rr.gatherObject(rank, { name: 'obj-arg/ga', root: size - 1 });
    if (rank === size - 1) checkDeep(gathered, [...Array(size).keys()], 'the gather after');
    const values = rank === size - 1 ? Array.from({ length: size }, (_, r) => -r) : null;
    const got = await rr.scatterObject(values, { name: 'obj-arg/sc', root: size - 1 });
    check(got === -rank, 'the scatter after', `rank ${rank} got ${got}`);
  },
};

const sync: ConformanceCase = {
  name: 'allgatherObjectSync, broadcastObjectSync, gatherObjectSync and scatterObjectSync: values of every kind',
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
    const gathered = rr.gatherObjectSync(valueOfRank(rank), { name: 'obj-sync/ga', root: size - 1 });
    checkDeep(gathered, rank === size - 1 ? Array.from({ length: size }, (_, r) => valueOfRank(r)) : null, 'gatherObjectSync');
    const values = rank === 0 ? Array.from({ length: size }, (_, r) => valueOfRank(r)) : null;
    checkDeep(rr.scatterObjectSync(values, { name: 'obj-sync/sc' }), valueOfRank(rank), 'scatterObjectSync');
  },
};

export const objectCases: readonly ConformanceCase[] = [allgather, broadcast, gather, scatter, refused, sync];
