/**
 * The one shape of every backend: a factory that connects this rank (config.rank of
 * config.size) to its peers and hands back the transport with what releases it. The engine's
 * worker calls the factory that backends.ts chooses; tests build worlds from the same factories.
 *
 * Each backend folder exports its factory: `tcpBackend` (tcp/index.ts), `mpiBackend`
 * (mpi/index.ts, loaded lazily by backends.ts), `soloBackend` (solo_transport.ts), and
 * `memoryBackend(world)` (memory/memory_transport.ts), which cannot be chosen by configuration.
 */
import type { Config } from '../core/config.js';
import type { Logger } from '../core/logger.js';
import type { Transport } from './transport.js';

/** A connected transport, and the close that also releases what the backend set up around it. */
export interface TransportHandle {
  readonly transport: Transport;
  /**
   * Closes the transport, then what the backend started for it (TCP: rank 0's store server;
   * MPI: MPI itself, when that is safe). Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Connects this rank with one backend. Rejects (InvalidArgumentError, TimeoutError, ...) when
 * the backend cannot start; `log` gets what the backend reports along the way.
 */
export type BackendFactory = (config: Config, log: Logger) => Promise<TransportHandle>;

/** The handle of a transport that needs nothing released but itself. */
export function handleOf(transport: Transport): TransportHandle {
  return { transport, close: () => transport.close() };
}
