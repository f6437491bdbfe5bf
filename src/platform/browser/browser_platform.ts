/**
 * The platform of a browser rank's program worker (platform.ts says how `#platform` picks it;
 * engine/threads/browser_protocol.ts how the rank's threads talk).
 */
import { InvalidArgumentError } from '../../core/errors.js';
import { WebStoreClient } from '../../rendezvous/web_store_client.js';
import { redacted } from '../../transport/web/index.js';
import { ElasticWorker } from '../elastic_worker.js';
import type { Platform } from '../platform.js';
import { pageEnvironment, startPageEngine, tellRankClosed } from './page_link.js';

/**
 * Whether Atomics.wait may block here: a page's main thread throws a TypeError (the value
 * compared differs, so where it may, it returns at once); a worker may.
 */
function probeMayBlock(): boolean {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

const kMayBlock = probeMayBlock();

/** The `argv` parameter of this worker's URL (a JSON array of strings), as ringrun's page sets it. */
function readProgramArgs(): readonly string[] {
  try {
    const text = new URL(String((globalThis as { location?: { href?: string } }).location?.href)).searchParams.get('argv');
    const args: unknown = text === null ? [] : JSON.parse(text);
    return Object.freeze(Array.isArray(args) ? args.map(String) : []);
  } catch {
    return Object.freeze([]);
  }
}

export const platform: Platform = Object.freeze({
  name: 'browser',
  environment: pageEnvironment,
  startEngine: startPageEngine,
  // A browser exposes no collector; its shared memory is freed when the collector decides.
  collector: () => undefined,
  mayBlock: () => kMayBlock,
  programArgs: readProgramArgs,
  joinElastic: async (config, id) => {
    if (config.storeUrl === undefined) {
      throw new InvalidArgumentError(
        'an elastic browser rank meets the launcher through its store bridge: RINGREDUCE_STORE_URL is not set (ringrun --elastic --browser sets it)',
      );
    }
    const socket = new WebSocket(config.storeUrl);
    socket.binaryType = 'arraybuffer';
    const store = await WebStoreClient.connect(socket, redacted(config.storeUrl), config.startTimeoutMs);
    return new ElasticWorker(config, id, store);
  },
  rankClosed: tellRankClosed,
  atProgramEnd: () => () => {},
} satisfies Platform);
