/**
 * Process sets, grouped collectives and join through the case list, so that they run on every
 * backend, MPI included (their own test files, test/conformance/process_sets|grouped|join.test.ts,
 * go deeper over memory and TCP).
 */
import { type ConformanceCase, check, checkJson } from './case.js';

const sets: ConformanceCase = {
  name: 'process sets: even and odd ranks allreduce and allgather under the same names at once, then the sets are removed',
  // One rank's evens would be every rank: a set refused, as Horovod refuses it.
  minRanks: 2,
  async run(rr, rank, size) {
    const evens = await rr.addProcessSet(Array.from({ length: Math.ceil(size / 2) }, (_, i) => 2 * i));
    const odds = await rr.addProcessSet(Array.from({ length: Math.floor(size / 2) }, (_, i) => 2 * i + 1));
    const mine = rank % 2 === 0 ? evens : odds;
    const sum = await rr.allreduce(new Float64Array([rank]), { name: 'sets/g', processSet: mine });
    const expected = mine.ranks.reduce((a, r) => a + r, 0);
    check(sum[0] === expected, 'allreduce in the set', `${sum[0]} != ${expected}`);
    const all = await rr.allgather(new Int32Array([rank]), { name: 'sets/g2', processSet: mine });
    checkJson([...all], mine.ranks, 'allgather in the set');
    const fromLast = await rr.broadcast(new Int32Array([rank]), { name: 'sets/b', root: mine.size() - 1, processSet: mine });
    check(fromLast[0] === mine.ranks[mine.size() - 1], 'broadcast from the set rank size-1', `${fromLast[0]}`);
    // The object collectives that have a root: ranks and roots inside the set.
    const last = mine.size() - 1;
    const gathered = await rr.gatherObject({ rank }, { name: 'sets/go', root: last, processSet: mine });
    if (mine.rank() === last)
      checkJson(
        gathered,
        mine.ranks.map((r) => ({ rank: r })),
        'gatherObject in the set',
      );
    else check(gathered === null, 'gatherObject in the set', 'not null off the root');
    const values = mine.rank() === last ? mine.ranks.map((r) => `to ${r}`) : null;
    const scattered = await rr.scatterObject(values, { name: 'sets/so', root: last, processSet: mine });
    check(scattered === `to ${rank}`, 'scatterObject in the set', `rank ${rank} got ${scattered}`);
    await rr.removeProcessSet(evens);
    await rr.removeProcessSet(odds);
  },
};

const grouped: ConformanceCase = {
  name: 'groupedAllreduce: mixed dtypes and shapes, results in order',
  async run(rr, rank, size) {
    const [a, b, c] = await rr.groupedAllreduce(
      [new Float32Array([rank, 1]), new Int32Array([rank * 10]), new Float64Array([1, 2, 3])],
      { name: 'grouped/case' },
    );
    const ranks = (size * (size - 1)) / 2;
    checkJson(
      [[...(a as Float32Array)], [...(b as Int32Array)], [...(c as Float64Array)]],
      [[ranks, size], [ranks * 10], [size, 2 * size, 3 * size]],
      'group',
    );
  },
};

const join: ConformanceCase = {
  name: 'join: rank r runs r + 1 steps; the others average over the ranks still there; join resolves to the last rank',
  async run(rr, rank, size) {
    for (let step = 0; step <= rank; step++) {
      const mean = await rr.allreduce(new Float64Array([rank]), { name: 'join/g', op: 'average' });
      // Ranks step..size-1 still take part at this step.
      const expected = (step + size - 1) / 2;
      check(mean[0] === expected, `step ${step}`, `average ${mean[0]} != ${expected}`);
    }
    const last = await rr.join();
    check(last === size - 1, 'join', `resolved to ${last}, not the last rank ${size - 1}`);
  },
};

export const setsAndJoinCases: readonly ConformanceCase[] = [sets, grouped, join];
