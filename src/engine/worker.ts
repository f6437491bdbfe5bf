/**
 * The entry point of the engine's worker thread: connects the transport, then feeds the
 * caller's messages to the Engine and posts completions back on the completion port, bumping
 * the shared signal so a caller blocked in a ...Sync call wakes up.
 */
import { resolve } from 'node:path';
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { joinedBecause } from '../core/config.js';
import { TimeoutError, toErrorRecord } from '../core/errors.js';
import { Logger } from '../core/logger.js';
import { timelinePathFor } from '../observability/timeline.js';
import type { TransportHandle } from '../transport/backend.js';
import { type BackendName, chooseBackend, kBackends } from '../transport/backends.js';
import { BurstGate } from './burst_gate.js';
import { DashboardReporter } from './dashboard_reporter.js';
import { Engine } from './engine.js';
import { readStats, StatsWriter } from './stats.js';
import { exchangeHosts } from './topology.js';
import { type FromEngine, kSignalBurst, kSignalCompletions, type ToEngine, type WorkerInit } from './worker_protocol.js';

const { config, port, signal, stats, dashboard } = workerData as WorkerInit;
/** The caller's requests arrive here (this module only ever runs as a worker). */
const fromCaller = parentPort as MessagePort;
/** Reports to ringrun's dashboard, when it watches (it sees the warnings and errors logged here too). */
let reporter: DashboardReporter | undefined;
const logger = new Logger(`[rank ${config.rank}]`, config.logLevel, (line) => {
  process.stderr.write(line);
  reporter?.noteLogLine(line);
});
/** The engine, once connected (the dashboard reporter reads it). */
let running: Engine | undefined;
const statsWriter = new StatsWriter(stats);
if (dashboard !== undefined) {
  reporter = new DashboardReporter(dashboard, {
    rank: config.rank,
    size: config.size,
    timelineFile: config.timeline && resolve(config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline),
    stats: () => (running ? readStats(statsWriter.buffer) : undefined),
    pending: (limit) => running?.pendingCalls(limit) ?? [],
    condition: () => running?.condition ?? { failure: undefined, closing: false },
  });
}

/**
 * Completions settled in one synchronous run of the engine (a fused step's hundred tensors)
 * reach the caller as one message at its end: one wake-up of the caller's thread, not a hundred.
 */
let outgoing: FromEngine[] = [];

function post(message: FromEngine): void {
  outgoing.push(message);
  if (outgoing.length === 1) queueMicrotask(flush);
}

function flush(): void {
  if (outgoing.length === 0) return;
  const messages = outgoing;
  outgoing = [];
  port.postMessage(messages);
  Atomics.add(signal, kSignalCompletions, 1);
  Atomics.notify(signal, kSignalCompletions);
}

type Connection = TransportHandle;
/** The backend connect() chose (it goes to the caller with 'ready': rr.backend()). */
let backend: BackendName = 'solo';

/** This rank's transport, from the backend its configuration chooses (transport/backends.ts). */
async function connect(): Promise<Connection> {
  backend = await chooseBackend(config, logger);
  return kBackends[backend](config, logger);
}

/**
 * Said at once when another launcher's variables made this process a rank (a warning when they
 * look left over, as RANK and WORLD_SIZE in a container's environment), and again in a
 * start-up timeout: a process that waits for peers that never come should say why it waits.
 */
function sayWhyJoined(): string | undefined {
  const source = config.jobSource;
  if (source === undefined) return undefined;
  const because = joinedBecause(source, config.rank, config.size);
  if (source.suspicious !== undefined) logger.warn(`joining a job as ${because}`);
  else logger.info(`joining a job as ${because}`);
  return because;
}

async function main(): Promise<void> {
  const because = sayWhyJoined();
  let connection: Connection;
  let hosts: number[] | undefined;
  try {
    connection = await connect();
    hosts = await exchangeHosts(connection.transport, config).catch(async (error) => {
      await connection.close();
      throw error;
    });
  } catch (error) {
    if (because !== undefined && error instanceof TimeoutError) error.message += ` (this process is ${because})`;
    reporter?.noteLogLine(` ERROR: ${(error as Error).message}`);
    void reporter?.close();
    post({ type: 'init-failed', error: toErrorRecord(error) });
    flush();
    port.close();
    return;
  }
  const enqueue = (message: ToEngine & { type: 'enqueue' }) => {
    for (const { id, request, buffer, output, fresh, set } of message.submissions) {
      engine.enqueue(id, request, buffer, output, fresh, set);
    }
  };
  // The submissions a burst posted before lowering its flag are queued on the port already.
  const drainSubmissions = () => {
    for (let m = receiveMessageOnPort(fromCaller); m; m = receiveMessageOnPort(fromCaller)) {
      const message = m.message as ToEngine;
      if (message.type === 'enqueue') enqueue(message);
      else setImmediate(() => void onMessage(message));
    }
  };
  const gate = config.burstHoldMs > 0 ? new BurstGate(signal, kSignalBurst, config.burstHoldMs, drainSubmissions) : undefined;
  if (hosts === undefined) logger.info("the launcher's placements do not say which host each rank is on: collectives run flat");
  const engine = new Engine(config, connection.transport, post, logger, gate, statsWriter, hosts);
  running = engine;
  const onMessage = async (message: ToEngine): Promise<void> => {
    if (message.type === 'enqueue') {
      enqueue(message);
      return;
    }
    fromCaller.off('message', onMessage);
    try {
      await engine.shutdown();
      await connection.close();
    } catch (error) {
      logger.warn(`shutdown: ${(error as Error).message}`);
    }
    await reporter?.close();
    post({ type: 'closed' });
    flush();
    port.close();
  };
  fromCaller.on('message', onMessage);
  post({ type: 'ready', backend });
}

void main();
