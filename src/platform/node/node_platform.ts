/** The platform of a Node process (platform.ts says how `#platform` picks it). */
import { v8Collector } from '../../core/v8_collector.js';
import { JobKey } from '../../rendezvous/auth.js';
import { TcpStoreClient } from '../../rendezvous/tcp_store.js';
import { ElasticWorker } from '../elastic_worker.js';
import type { Platform } from '../platform.js';
import { startEngineInThread } from './engine_in_thread.js';
import { startEngineWorker } from './engine_worker.js';

export const platform: Platform = Object.freeze({
  name: 'node',
  environment: async () => process.env,
  startEngine: (init, events) => (init.config.engineThread ? startEngineWorker : startEngineInThread)(init, events),
  collector: v8Collector,
  programArgs: () => Object.freeze(process.argv.slice(2)),
  // Node lets every thread block, its main thread too.
  mayBlock: () => true,
  joinElastic: async (config, id) => {
    const store = await TcpStoreClient.connect({
      host: config.storeHost,
      port: config.storePort,
      connectTimeoutMs: config.startTimeoutMs,
      key: new JobKey(config.secret),
      // The job cannot go on without ringrun's store: its loss ends the worker, saying so.
      hostedBy: 'ringrun',
      silenceMs: config.ioTimeoutMs,
    });
    return new ElasticWorker(config, id, store);
  },
  rankClosed: () => {},
  atProgramEnd: (task) => {
    // The process exits after the task whatever it says: the engine has logged why it failed.
    const run = () => void task().catch(() => {});
    process.once('beforeExit', run);
    return () => process.off('beforeExit', run);
  },
} satisfies Platform);
