/**
 * The platform of a browser rank's program worker (platform.ts says how `#platform` picks it;
 * engine/browser_protocol.ts how the rank's threads talk).
 */
import { InvalidArgumentError } from '../../core/errors.js';
import type { Platform } from '../platform.js';
import { pageEnvironment, startPageEngine } from './page_link.js';

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

export const platform: Platform = Object.freeze({
  name: 'browser',
  environment: pageEnvironment,
  startEngine: startPageEngine,
  // A browser exposes no collector; its shared memory is freed when the collector decides.
  collector: () => undefined,
  mayBlock: () => kMayBlock,
  joinElastic: async () => {
    throw new InvalidArgumentError(
      'elastic jobs (ringrun --elastic) have no browser ranks: their generations come from a TCP store, which a browser cannot reach',
    );
  },
} satisfies Platform);
