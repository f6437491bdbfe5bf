/**
 * The algorithms the engine chooses only from 8 ranks on (Rabenseifner's allreduce and reduce,
 * recursive halving, Bruck's allgather, scatter + allgather broadcast), forced through the
 * `algorithms` setting (RINGREDUCE_ALGORITHMS) into worlds of 3 ranks (the folds of a size that
 * is not a power of two) and 4 (the plain halving and doubling), and run through the
 * conformance cases of their collectives (cases/): every dtype and op each supports, counts 0,
 * 1, N-1, N, N+1 and 1000 (and the cases' uneven blocks, 2-D rows, splits, scales, roots).
 *
 * One world per backend, the five forced together (each belongs to another collective):
 * memory with 4 ranks, tcp and web with 3; and a tcp world of 4 with the ring allreduce at the
 * small counts and scatter + allgather over the ring's allgather. With fusion off, so that every
 * count reaches the algorithm as its own buffer (fused, the small counts would travel as one),
 * and segments of 1 KiB, so that the 1000-element buffers are cut into several pipelined
 * segments. The 2^18 and 2^20 + 3 element cases are left out for the time budget of the
 * conformance tier (with 1 KiB segments they are thousands of steps; collectives.test.ts runs
 * them with the engine's choice). The allgather that scatter + allgather runs is allgather's
 * choice: forced to Bruck's, on 4 ranks that makes it recursive doubling relative to the root,
 * on 3 Bruck's.
 *
 * Not here: MPI (its own collectives replace these algorithms, so forcing ours tests nothing
 * there: docs/algorithms.md), and the browser ranks, whose links are the web backend's
 * (multiprocess/browser_ranks.test.ts runs them with the engine's choice).
 */
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import type { AlgorithmsSetting } from '../../src/core/algorithm_names.js';
import type { InitOptions } from '../../src/core/config.js';
import { startMemoryWorld } from '../helpers/local_engine.js';
import { startWebWorld, startWorld, stopWorld } from '../helpers/world.js';
import type { ConformanceCase } from './cases/case.js';
import { kCases } from './cases/index.js';
import { runOnWorld, sizeSkipReason } from './cases/runner.js';

/** The algorithms the engine runs only from 8 ranks on, one per collective, forced together. */
const kFromEightRanks: AlgorithmsSetting = {
  allreduce: 'rabenseifner',
  allgather: 'bruck',
  broadcast: 'scatter_allgather',
  reducescatter: 'recursive_halving',
  reduce: 'rabenseifner',
};

/**
 * The ring allreduce at the small counts (the engine runs it only past 64 KiB below 8 ranks, and
 * from 8 on only past the model's crossover), and scatter + allgather over the ring's allgather,
 * allgather's own choice below 8 ranks.
 */
const kRingsAtSmallCounts: AlgorithmsSetting = { allreduce: 'ring', broadcast: 'scatter_allgather' };

/** World options: fusion off (each count its own buffer), 1 KiB segments (the 1000-element buffers pipelined). */
function optionsFor(algorithms: AlgorithmsSetting): InitOptions {
  // A stalled case fails in seconds rather than after the default minute.
  return { algorithms, fusionThresholdBytes: 0, segmentBytes: 1024, stallTimeoutMs: 20_000 };
}

/**
 * The cases of the forced collectives that reach their algorithms with new lengths, blocks or
 * roots. Not the large ones; adasum (its own algorithm); the ...Sync ones (a thread per rank);
 * the argument errors (refused before the engine), the kinds of results, and the scales (applied
 * outside the algorithms, whose `average` the small counts check): 1.7 s of the time budget.
 */
function ofCollectives(algorithms: AlgorithmsSetting): (c: ConformanceCase) => boolean {
  return (c) => {
    const collective = /^(allreduce|allgather|broadcast|reducescatter|reduce)\b/.exec(c.name)?.[1];
    return (
      collective !== undefined &&
      collective in algorithms &&
      !c.needsSync &&
      !/2\^20 \+ 3|2\^18|adasum|argument errors|prescale|keeps the kind|typed array in/.test(c.name)
    );
  };
}

interface ForcedWorld {
  name: string;
  size: number;
  algorithms: AlgorithmsSetting;
  start(size: number, options: InitOptions): Promise<RingReduce[]>;
}

const kWorlds: readonly ForcedWorld[] = [
  { name: 'memory', size: 4, algorithms: kFromEightRanks, start: async (size, options) => startMemoryWorld(size, options) },
  { name: 'tcp', size: 3, algorithms: kFromEightRanks, start: startWorld },
  { name: 'web', size: 3, algorithms: kFromEightRanks, start: startWebWorld },
  { name: 'tcp', size: 4, algorithms: kRingsAtSmallCounts, start: startWorld },
];

for (const { name, size, algorithms, start } of kWorlds) {
  describe(`${name}, ${size} ranks, algorithms forced: ${JSON.stringify(algorithms)}`, () => {
    let world: RingReduce[] = [];
    before(async () => {
      world = await start(size, optionsFor(algorithms));
    });
    after(async () => {
      await stopWorld(world);
    });
    for (const c of kCases.filter(ofCollectives(algorithms))) {
      const skip = sizeSkipReason(c, size);
      test(c.name, skip ? { skip } : {}, () => runOnWorld(c, world));
    }
  });
}
