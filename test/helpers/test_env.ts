/**
 * The environment in-process worlds read: none, but RINGREDUCE_READY_EXCHANGE and
 * RINGREDUCE_ALGORITHMS, so that one run of a suite can force either exchange of ready rounds
 * (`RINGREDUCE_READY_EXCHANGE=recursive-doubling node --test ...`) or the collectives' algorithms
 * (`RINGREDUCE_ALGORITHMS=allreduce=rabenseifner node --test ...`) on memory worlds as on TCP ones
 * (whose ranks read the whole environment).
 */
import { kEnv } from '../../src/core/env_names.js';

export function testEnv(): Record<string, string | undefined> {
  return { [kEnv.readyExchange]: process.env[kEnv.readyExchange], [kEnv.algorithms]: process.env[kEnv.algorithms] };
}
