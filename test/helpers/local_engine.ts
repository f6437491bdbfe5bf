/**
 * N ranks in this thread over the memory transport, each a real Engine behind the public facade
 * (RingReduce.withEngine): the conformance suite's 'memory' backend. No worker threads and no
 * sockets, so a world starts in a millisecond and a failure's stack is all in one thread.
 *
 * LocalEngine is the EngineLink of such a rank: it hands calls straight to the Engine and
 * settles them from the engine's posted completions, as EngineClient does across the thread
 * boundary. The ...Sync calls cannot work here: they block the caller's thread until every rank
 * has run the collective, and that thread is the one all the engines run in.
 */
import type { Call, Completion, EngineLink } from '../../src/api/engine_client.js';
import { RingReduce } from '../../src/api/runtime.js';
import { type Config, type InitOptions, resolveConfig } from '../../src/core/config.js';
import { fromErrorRecord, RingReduceError } from '../../src/core/errors.js';
import { Logger } from '../../src/core/logger.js';
import { Engine, type EngineOptions } from '../../src/engine/engine.js';
import type { FromEngine } from '../../src/engine/threads/worker_protocol.js';
import { createMemoryWorld, type MemoryWorld, type MemoryWorldOptions } from '../../src/transport/memory/memory_transport.js';
import type { Transport } from '../../src/transport/transport.js';
import { testEnv } from './test_env.js';

interface Pending {
  resolve: (completion: Completion) => void;
  reject: (error: Error) => void;
  released: (() => void) | undefined;
}

/** An EngineLink over an Engine running in this thread. */
export class LocalEngine implements EngineLink {
  readonly engine: Engine;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(
    private readonly config: Config,
    transport: Transport,
    logger: Logger = new Logger(`[rank ${config.rank}]`, config.logLevel),
    options: EngineOptions = {},
  ) {
    this.engine = new Engine(config, transport, (message) => this.dispatch(message), logger, options);
  }

  submit(call: Call): Promise<Completion> {
    const id = this.nextId++;
    // Registered before enqueue: an engine that is failed or closing settles the call at once.
    const settled = new Promise<Completion>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, released: call.released });
    });
    try {
      const { request, buffer, output, fresh, set } = call;
      this.engine.enqueue({
        id,
        request,
        buffer,
        ...(output && { output }),
        ...(fresh && { fresh }),
        ...(set !== undefined && { set }),
      });
    } catch (error) {
      const pending = this.pending.get(id);
      this.pending.delete(id);
      pending?.released?.();
      throw error;
    }
    return settled;
  }

  submitSync(call: Call): Completion {
    // Nothing reached the engine: the call's memory goes back at once (as EngineClient does for a refused call).
    call.released?.();
    throw new RingReduceError(
      `${call.request.op}Sync '${call.request.name}' on rank ${this.config.rank}: the engine of this rank runs in the ` +
        "caller's own thread (test/helpers/local_engine.ts), which a ...Sync call would block for good; use the async call",
    );
  }

  async shutdown(): Promise<void> {
    // The engine fails what is still queued (posting each failure) and leaves the job with the others.
    await this.engine.shutdown();
  }

  private dispatch(message: FromEngine): void {
    if (message.type !== 'done' && message.type !== 'failed') return;
    const call = this.pending.get(message.id);
    if (!call) return;
    this.pending.delete(message.id);
    call.released?.();
    if (message.type === 'failed') call.reject(fromErrorRecord(message.error));
    else call.resolve({ output: message.output, shape: message.shape, counts: message.counts });
  }
}

export interface MemoryWorldInit extends InitOptions {
  /** How the memory transport delivers (default: macrotask delivery, as test/helpers/engines.ts). */
  transport?: MemoryWorldOptions;
}

/** The ranks of a memory world, and the world itself (for fault injection). */
export interface MemoryRanks extends Array<RingReduce> {
  world: MemoryWorld;
}

/**
 * Starts `size` ranks in this thread over the memory transport, each a RingReduce over its own
 * Engine. Options as for RingReduce.init (the environment is not read); stop them with
 * stopWorld (test/helpers/world.ts) or shutdown() on every rank at once.
 */
export function startMemoryWorld(size: number, options: MemoryWorldInit = {}): MemoryRanks {
  const { transport: transportOptions, ...init } = options;
  const world = createMemoryWorld(size, { delivery: 'macrotask', ...transportOptions });
  const ranks = world.map((transport, rank) => {
    // The store address is never used (the memory transport needs no rendezvous) but a job of
    // more than one rank must name one.
    const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', ...init }, testEnv());
    return RingReduce.withEngine(config, new LocalEngine(config, transport));
  }) as MemoryRanks;
  ranks.world = world;
  return ranks;
}
