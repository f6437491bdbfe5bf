/**
 * The MPI backend, assembled: load the addon, initialise MPI on this (the engine's worker)
 * thread, check that MPI and the configuration agree on rank and size, then an MpiTransport
 * over MPI_COMM_WORLD. No rendezvous: the MPI launcher already connected the job.
 *
 * Closing finalises MPI when the transport closed cleanly (every rank reached shutdown and no
 * MPI operation is in flight). Otherwise MPI_Finalize could block forever, so it is skipped:
 * when this process exits, the MPI launcher sees a rank leave without finalising and ends the
 * job with its own message. MPI can be initialised once per process, so one init()/shutdown()
 * per process.
 *
 * `mpiBackend` is the backend factory (../backend.ts). backends.ts imports this module only when
 * MPI is asked for or probed, so that a job without the addon never loads it.
 */
import type { Config } from '../../core/config.js';
import { InvalidArgumentError, RingReduceError } from '../../core/errors.js';
import { Logger } from '../../core/logger.js';
import type { BackendFactory, TransportHandle } from '../backend.js';
import { loadMpiBinding, tryLoadMpiBinding } from './loader.js';
import { MpiTransport } from './mpi_transport.js';
import type { MpiBinding, MpiWorldInfo } from './native_binding.js';

export { MpiTransport, type MpiTransportOptions } from './mpi_transport.js';

export interface MpiTransportHandle extends TransportHandle {
  readonly transport: MpiTransport;
  /** Closes the transport, then finalises MPI if that is safe. Idempotent. */
  close(): Promise<void>;
}

/** Whether the addon is built and loads (MPI itself is not started). */
export function isMpiAvailable(): boolean {
  return tryLoadMpiBinding() !== undefined;
}

/** The MPI backend: MPI_COMM_WORLD as the launcher connected it. */
export const mpiBackend: BackendFactory = (config, log) => createMpiTransport(config, log);

/** `logger`: where the MPI library in use and a skipped MPI_Finalize are reported (default: stderr, at config.logLevel). */
export async function createMpiTransport(
  config: Config,
  logger: Logger = new Logger(`[rank ${config.rank}]`, config.logLevel),
): Promise<MpiTransportHandle> {
  const binding = loadMpiBinding();
  let world: MpiWorldInfo;
  try {
    world = binding.init();
  } catch (error) {
    throw new RingReduceError(`MPI failed to start: ${(error as Error).message}`);
  }
  if (world.rank !== config.rank || world.size !== config.size) {
    throw new InvalidArgumentError(
      `MPI says this process is rank ${world.rank} of ${world.size}, but ringreduce was configured as rank ${config.rank} of ${config.size}; ` +
        'under an MPI launcher leave rank and size to it (unset the init() options and RINGREDUCE_RANK / RINGREDUCE_SIZE)',
    );
  }
  logger.debug(`MPI backend: ${world.library} (${world.libraryPath}), thread level ${world.threadLevel}`);
  const transport = new MpiTransport(binding, world, { ioTimeoutMs: config.ioTimeoutMs });
  return handle(transport, binding, logger);
}

function handle(transport: MpiTransport, binding: MpiBinding, logger: Logger): MpiTransportHandle {
  let closing: Promise<void> | null = null;
  const close = async () => {
    const result = await transport.closeAndReport();
    if (result.clean) {
      binding.finalize();
      return;
    }
    logger.warn(`MPI was not finalised (${result.reason}); when this process exits, the MPI launcher will end the job`);
  };
  return {
    transport,
    close: () => {
      closing ??= close();
      return closing;
    },
  };
}
