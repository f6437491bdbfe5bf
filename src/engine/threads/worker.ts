/**
 * The entry of the engine's Node worker thread: the Node host (node_engine_host.ts) with the
 * caller's requests on the worker's own channel, taken early with receiveMessageOnPort, and
 * completions on a port of their own, which a blocked caller drains.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { runEngine } from './engine_main.js';
import { nodeEngineHost } from './node_engine_host.js';
import type { ToEngine, WorkerInit } from './worker_protocol.js';

const init = workerData as WorkerInit;
const { port } = init;
/** The caller's requests arrive here (this module only ever runs as a worker). */
const fromCaller = parentPort as MessagePort;

void runEngine(
  nodeEngineHost(init, {
    listen(onMessage) {
      const listener = (message: ToEngine) => onMessage(message);
      fromCaller.on('message', listener);
      return () => fromCaller.off('message', listener);
    },
    takePosted() {
      const messages: ToEngine[] = [];
      for (let m = receiveMessageOnPort(fromCaller); m; m = receiveMessageOnPort(fromCaller))
        messages.push(m.message as ToEngine);
      return messages;
    },
    post: (batch) => port.postMessage(batch),
    close: () => port.close(),
  }),
);
