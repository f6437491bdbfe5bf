/**
 * The engine on the caller's own thread (RINGREDUCE_ENGINE_THREAD=0): the Node host
 * (engine/threads/node_engine_host.ts) with a channel of direct calls, so a call costs one
 * thread wake-up (the peer's bytes arriving) instead of three (docs/performance.md).
 *
 * Messages each way are delivered in order in a microtask, never inside the call that posts
 * them, as a port would deliver them. The engine's module is loaded on first use only, so a
 * program with the engine on its own thread loads none of it on the caller's.
 *
 * What the caller's thread then cannot do: block in a ...Sync call (the engine could not run
 * while it waits; calls.ts refuses them, naming this setting). And the process is held alive only
 * while calls are pending (keepAlive), as a worker's would be, so that a program that ends
 * without shutdown() still reaches 'beforeExit'.
 */
import { RingReduceError } from '../../core/errors.js';
import { afterThisTask } from '../../core/soon.js';
import type { EngineInit, FromEngine, ToEngine } from '../../engine/threads/worker_protocol.js';
import type { EngineEvents, EngineThread } from '../platform.js';

/** Starts the engine on this thread; `events` hears its completions in a later microtask. */
export function startEngineInThread(init: EngineInit, events: EngineEvents): EngineThread {
  let toEngine: ToEngine[] = [];
  let onMessage: ((message: ToEngine) => void) | undefined;
  let deliveryScheduled = false;
  // Holds the loop while calls are pending, whatever the transport (MPI's completions come from
  // its own thread and hold nothing); the engine's sockets never do (started, below), so a
  // call's transition toggles this one handle instead of every socket.
  const holder = setInterval(() => {}, 2 ** 30);
  const deliver = () => {
    deliveryScheduled = false;
    const batch = toEngine;
    toEngine = [];
    for (const message of batch) onMessage?.(message);
  };
  const scheduleDelivery = () => {
    if (deliveryScheduled || onMessage === undefined || toEngine.length === 0) return;
    deliveryScheduled = true;
    afterThisTask(deliver);
  };
  const started = Promise.all([import('../../engine/threads/engine_main.js'), import('../../engine/threads/node_engine_host.js')])
    .then(([{ runEngine }, { nodeEngineHost }]) =>
      runEngine(
        nodeEngineHost(
          init,
          {
            listen(handler) {
              onMessage = handler;
              scheduleDelivery();
              return () => {
                onMessage = undefined;
              };
            },
            takePosted() {
              const batch = toEngine;
              toEngine = [];
              return batch;
            },
            post: (batch: FromEngine[]) => afterThisTask(() => events.messages(batch)),
            close: () => {},
            // The caller's burst ends (engine_client.ts posts its rest in a microtask queued
            // before the delivery's) before its first call is delivered: a microtask after the
            // delivery sees the whole burst, without waiting for the next turn of the loop.
            reportSoon: afterThisTask,
          },
          { started: (running) => running.holdProcess(false) },
        ),
      ),
    )
    .catch((error: unknown) =>
      events.gone(
        new RingReduceError(`the ringreduce engine could not start on this thread: ${(error as Error)?.message ?? error}`),
      ),
    );
  return {
    post(message) {
      toEngine.push(message);
      scheduleDelivery();
    },
    // calls.ts refuses ...Sync calls on this thread before they are made.
    takeSync: () => [],
    keepAlive(keep) {
      if (keep) holder.ref();
      else holder.unref();
    },
    terminate: () => started.then(() => clearInterval(holder)),
  };
}
