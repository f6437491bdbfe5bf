/** The platform of a Node process (platform.ts says how `#platform` picks it). */
import { v8Collector } from '../../core/v8_collector.js';
import type { Platform } from '../platform.js';
import { ElasticWorker } from './elastic_worker.js';
import { startEngineWorker } from './engine_worker.js';

export const platform: Platform = Object.freeze({
  name: 'node',
  environment: async () => process.env,
  startEngine: startEngineWorker,
  collector: v8Collector,
  programArgs: () => Object.freeze(process.argv.slice(2)),
  // Node lets every thread block, its main thread too.
  mayBlock: () => true,
  joinElastic: (config, id) => ElasticWorker.connect(config, id),
} satisfies Platform);
