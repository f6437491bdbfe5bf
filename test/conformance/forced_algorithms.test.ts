/**
 * The algorithms the engine chooses only from 8 ranks on (Rabenseifner's allreduce and reduce,
 * recursive halving, Bruck's allgather, scatter + allgather broadcast), forced through the
 * `algorithms` setting (RINGREDUCE_ALGORITHMS) into worlds of 3 ranks (the folds of a size that
 * is not a power of two) and 4 (the plain halving and doubling), and run through the
 * conformance cases of their collectives (cases/): every dtype and op each supports, counts 0,
 * 1, N-1, N, N+1 and 1000 (and the cases' uneven blocks, 2-D rows, splits, scales, roots).
 *
 * One world per backend, the five forced together (each belongs to another collective):
 * memory with 4 ranks, tcp and web with 3. With fusion off, so that every count reaches the
 * algorithm as its own buffer (fused, the small counts would travel as one), and segments of
 * 1 KiB, so that the 1000-element buffers are cut into several pipelined segments. The 2^18 and
 * 2^20 + 3 element cases are left out for the time budget of the conformance tier (with 1 KiB
 * segments they are thousands of steps; collectives.test.ts runs them with the engine's choice).
 * The allgather that scatter + allgather runs is allgather's choice, forced here to Bruck's:
 * on 4 ranks that makes it recursive doubling relative to the root, on 3 Bruck's.
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

const kForced: AlgorithmsSetting = {
  allreduce: 'rabenseifner',
  allgather: 'bruck',
  broadcast: 'scatter_allgather',
  reducescatter: 'recursive_halving',
  reduce: 'rabenseifner',
};

const kOptions: InitOptions = {
  algorithms: kForced,
  fusionThresholdBytes: 0,
  segmentBytes: 1024,
  // A stalled case fails in seconds rather than after the default minute.
  stallTimeoutMs: 20_000,
};

/** The cases of the forced collectives, but the large ones, adasum (its own algorithm) and the ...Sync ones (a thread per rank). */
function ofForcedCollectives(c: ConformanceCase): boolean {
  const collective = /^(allreduce|allgather|broadcast|reducescatter|reduce)\b/.exec(c.name)?.[1];
  return (
    collective !== undefined &&
    !c.name.includes('adasum') &&
    !c.needsSync &&
    !c.name.includes('2^20 + 3') &&
    !c.name.includes('2^18')
  );
}

const kWorlds: ReadonlyArray<{ name: string; size: number; start: (size: number) => Promise<RingReduce[]> }> = [
  { name: 'memory', size: 4, start: async (size) => startMemoryWorld(size, kOptions) },
  { name: 'tcp', size: 3, start: (size) => startWorld(size, kOptions) },
  { name: 'web', size: 3, start: (size) => startWebWorld(size, kOptions) },
];

for (const { name, size, start } of kWorlds) {
  describe(`${name}, ${size} ranks, algorithms forced: ${JSON.stringify(kForced)}`, () => {
    let world: RingReduce[] = [];
    before(async () => {
      world = await start(size);
    });
    after(async () => {
      await stopWorld(world);
    });
    for (const c of kCases.filter(ofForcedCollectives)) {
      const skip = sizeSkipReason(c, size);
      test(c.name, skip ? { skip } : {}, () => runOnWorld(c, world));
    }
  });
}
