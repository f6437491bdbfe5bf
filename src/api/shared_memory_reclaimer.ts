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
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Let go of this much shared memory before collecting. */
export const kDefaultReclaimBytes = 256 * 1024 * 1024;

type Collect = (options?: { type: 'minor' | 'major' }) => void;

let collector: Collect | undefined | null = null;

function loadCollector(): Collect | undefined {
  const existing = (globalThis as { gc?: Collect }).gc;
  if (existing) return existing;
  try {
    // Exposes V8's collector to a new context only: nothing else in the process changes.
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as Collect;
  } catch {
    return undefined;
  }
}

export class SharedMemoryReclaimer {
  private released = 0;
  private scheduled = false;

  constructor(private readonly thresholdBytes = kDefaultReclaimBytes) {}

  /** This thread let go of (or allocated a short-lived) `bytes` of shared memory. */
  release(bytes: number): void {
    this.released += bytes;
    if (this.released < this.thresholdBytes || this.scheduled) return;
    this.released = 0;
    if (collector === null) collector = loadCollector();
    const collect = collector;
    if (!collect) return;
    // Outside the call stack that still holds the latest handles.
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      collect({ type: 'minor' });
    }).unref();
  }
}
