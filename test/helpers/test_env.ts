/**
 * The environment in-process worlds read: none, but RINGREDUCE_READY_EXCHANGE, so that one run
 * of a suite can force either exchange of ready rounds (`RINGREDUCE_READY_EXCHANGE=recursive-doubling
 * node --test ...`) on memory worlds as on TCP ones (whose ranks read the whole environment).
 */
import { kEnv } from '../../src/core/env_names.js';

export function testEnv(): Record<string, string | undefined> {
  return { [kEnv.readyExchange]: process.env[kEnv.readyExchange] };
}
