/**
 * Gives fresh SharedArrayBuffer memory back to the system in time.
 *
 * Why: V8 frees a SharedArrayBuffer's memory only when every thread that saw it has collected
 * its handle, and it does not count shared memory as heap pressure, so a thread that allocates
 * little JavaScript rarely collects. A loop of allreduces of 64 MiB with fresh outputs reached
 * a peak RSS of 5.7 GiB (a plain loop allocating 40 such buffers: 2.6 GiB). The caller's thread
 * (fresh outputs) and the engine's thread (its handles, allgather outputs) each count the
 * shared bytes they have let go of and, past `thresholdBytes`, run a minor (young generation)
 * collection: about 2 ms, proportional to the few live young objects, not to the heap, and it
 * frees the short-lived handles (the plain loop then peaks at 363 MiB).
 */
import { runSoon } from './soon.js';

/** Let go of this much shared memory before collecting. */
export const kDefaultReclaimBytes = 256 * 1024 * 1024;

export type Collect = (options?: { type: 'minor' | 'major' }) => void;

/** An adaptive reclaimer collects after at least this much, and after twice its largest buffer. */
export const kMinReclaimBytes = 32 * 1024 * 1024;

export interface ReclaimerOptions {
  /** Collect after at most this many bytes let go of. Default kDefaultReclaimBytes. */
  thresholdBytes?: number;
  /**
   * Collect sooner for large buffers: after twice the largest one let go of since the last
   * collection (at least kMinReclaimBytes), so that a loop allocating them gets its old ones
   * back before it allocates many more (see "Fresh memory" in docs/performance.md).
   */
  adaptive?: boolean;
  /**
   * The thread's collector: V8's on Node (core/v8_collector.ts), a counter in tests. Unset (a
   * browser, which exposes none): the reclaimer only counts.
   */
  collect?: Collect;
}

export class SharedMemoryReclaimer {
  private released = 0;
  private largest = 0;
  private scheduled = false;
  private readonly thresholdBytes: number;
  private readonly adaptive: boolean;
  private readonly collectWith: Collect | undefined;

  constructor(options: ReclaimerOptions = {}) {
    this.thresholdBytes = options.thresholdBytes ?? kDefaultReclaimBytes;
    this.adaptive = options.adaptive ?? false;
    this.collectWith = options.collect;
  }

  /** Bytes let go of after which the next collection runs. */
  get threshold(): number {
    if (!this.adaptive) return this.thresholdBytes;
    return Math.min(this.thresholdBytes, Math.max(kMinReclaimBytes, 2 * this.largest));
  }

  /** This thread let go of (or allocated a short-lived) `bytes` of shared memory. */
  release(bytes: number): void {
    this.released += bytes;
    this.largest = Math.max(this.largest, bytes);
    if (this.released < this.threshold || this.scheduled) return;
    this.released = 0;
    this.largest = 0;
    const collect = this.collectWith;
    if (!collect) return;
    // Outside the call stack that still holds the latest handles.
    this.scheduled = true;
    runSoon(
      () => {
        this.scheduled = false;
        collect({ type: 'minor' });
      },
      { unref: true },
    );
  }
}
