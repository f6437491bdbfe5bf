/**
 * Every conformance case, in the order they run. A new collective is a new file of cases
 * (see case.ts for the format) and one line here; every backend then runs them (memory and tcp:
 * collectives.test.ts, MPI: test/multiprocess/fixtures/mpi_conformance_job.ts).
 */
import { adasumCases } from './adasum.js';
import { allgatherCases } from './allgather.js';
import { allreduceCases } from './allreduce.js';
import { alltoallCases } from './alltoall.js';
import { barrierCases } from './barrier.js';
import { broadcastCases } from './broadcast.js';
import type { ConformanceCase } from './case.js';
import { compressionCases } from './compression.js';
import { deadlineCases } from './deadlines.js';
import { gatherCases } from './gather.js';
import { negotiationCases } from './negotiation.js';
import { objectCases } from './objects.js';
import { pointToPointCases } from './point_to_point.js';
import { pointToPointPatternCases } from './point_to_point_patterns.js';
import { reduceCases } from './reduce.js';
import { reducescatterCases } from './reducescatter.js';
import { scatterCases } from './scatter.js';
import { setsAndJoinCases } from './sets_and_join.js';

export const kCases: readonly ConformanceCase[] = [
  ...allreduceCases,
  ...allgatherCases,
  ...broadcastCases,
  ...barrierCases,
  ...reducescatterCases,
  ...alltoallCases,
  ...reduceCases,
  ...gatherCases,
  ...scatterCases,
  ...pointToPointCases,
  ...pointToPointPatternCases,
  ...objectCases,
  ...negotiationCases,
  ...setsAndJoinCases,
  ...compressionCases,
  ...adasumCases,
  ...deadlineCases,
];

const names = new Set<string>();
for (const c of kCases) {
  if (names.has(c.name)) throw new Error(`two conformance cases are named '${c.name}'`);
  names.add(c.name);
}
