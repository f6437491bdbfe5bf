/**
 * The backends a job's configuration can choose, and the rule that chooses one (the `backend`
 * setting, RINGREDUCE_BACKEND: tcp, mpi, auto or web; docs/env.md):
 *
 * - 'mpi': MPI, whatever the size (MPI itself may run a job of one process).
 * - 'web': only when asked for (a job with browser ranks: every rank runs it), solo for one rank.
 * - 'auto' under an MPI launcher with more than one rank: MPI when the addon loads, else TCP
 *   (logged at info level: the job still runs, over the store the launcher's environment names).
 * - otherwise: solo for a job of one rank, TCP for more.
 *
 * The memory backend is not here: its ranks live in one thread, so only a test that holds a
 * memory world can hand them out (memoryBackend(world)).
 */
import type { Config } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import type { BackendFactory } from './backend.js';
import { soloBackend } from './solo_transport.js';
import { tcpBackend } from './tcp/index.js';

export type BackendName = 'tcp' | 'mpi' | 'solo' | 'web';

/** Loaded only when MPI is asked for or probed: the addon is optional, absent where MPI is not installed. */
const loadMpiModule = () => import('./mpi/index.js');
/** Loaded only for a web job: it brings the `ws` package. */
const loadWebModule = () => import('./web/node_openers.js');

export const kBackends: Readonly<Record<BackendName, BackendFactory>> = {
  tcp: tcpBackend,
  mpi: async (config, log) => (await loadMpiModule()).mpiBackend(config, log),
  solo: soloBackend,
  web: async (config, log) => (await loadWebModule()).nodeWebBackend(config, log),
};

/** Whether the MPI addon is built and loads here (MPI itself is not started). */
export async function mpiAddonLoads(): Promise<boolean> {
  return (await loadMpiModule()).isMpiAvailable();
}

/** The backend `config` asks for. `addonLoads` is the probe of the MPI addon (replaced in tests). */
export async function chooseBackend(
  config: Config,
  log: Logger,
  addonLoads: () => Promise<boolean> = mpiAddonLoads,
): Promise<BackendName> {
  if (config.backend === 'mpi') return 'mpi';
  if (config.backend === 'web') return config.size === 1 ? 'solo' : 'web';
  if (config.backend === 'auto' && config.underMpi && config.size > 1) {
    if (await addonLoads()) return 'mpi';
    log.info('started by an MPI launcher, but the MPI addon is not built: using TCP');
  }
  return config.size === 1 ? 'solo' : 'tcp';
}
