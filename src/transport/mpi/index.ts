/**
 * The MPI backend (issue 5): placeholder until the native addon lands. It reports that MPI is
 * unavailable, and asking for it explains what is missing.
 */
import type { Config } from '../../api/config.js';
import { InvalidArgumentError } from '../../api/errors.js';
import type { Transport } from '../transport.js';

export function isMpiAvailable(): boolean {
  return false;
}

export async function createMpiTransport(_config: Config): Promise<{ transport: Transport; close: () => Promise<void> }> {
  throw new InvalidArgumentError(
    "the MPI backend was requested (RINGREDUCE_BACKEND=mpi or backend: 'mpi') but this build of ringreduce has no MPI addon; use the TCP backend",
  );
}
