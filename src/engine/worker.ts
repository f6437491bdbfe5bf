/**
 * The entry point of the engine's worker thread: connects the transport, then feeds the
 * caller's messages to the Engine and posts completions back on the completion port, bumping
 * the shared signal so a caller blocked in a ...Sync call wakes up.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { toErrorRecord } from '../core/errors.js';
import { Logger } from '../observability/logger.js';
import type { TransportHandle } from '../transport/backend.js';
import { chooseBackend, kBackends } from '../transport/backends.js';
import { BurstGate } from './burst_gate.js';
import { Engine } from './engine.js';
import { type FromEngine, kSignalBurst, kSignalCompletions, type ToEngine, type WorkerInit } from './worker_protocol.js';

const { config, port, signal } = workerData as WorkerInit;
/** The caller's requests arrive here (this module only ever runs as a worker). */
const fromCaller = parentPort as MessagePort;
const logger = new Logger(`[rank ${config.rank}]`, config.logLevel);

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

/** This rank's transport, from the backend its configuration chooses (transport/backends.ts). */
async function connect(): Promise<Connection> {
  const backend = await chooseBackend(config, logger);
  return kBackends[backend](config, logger);
}

async function main(): Promise<void> {
  let connection: Connection;
  try {
    connection = await connect();
  } catch (error) {
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
  const engine = new Engine(config, connection.transport, post, logger, gate);
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
    post({ type: 'closed' });
    flush();
    port.close();
  };
  fromCaller.on('message', onMessage);
  post({ type: 'ready' });
}

void main();
