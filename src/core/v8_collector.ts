/**
 * V8's garbage collector as a function, for the SharedMemoryReclaimer of a Node thread (the
 * caller's and the engine's). Node only: the browser build never imports this module.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Collect } from './shared_memory_reclaimer.js';

/**
 * A collector that loads V8's at its first call (a thread that never lets go of much shared
 * memory never exposes it), and does nothing where V8 refuses.
 */
export function v8Collector(): Collect {
  let collect: Collect | undefined | null = null;
  return (options) => {
    if (collect === null) collect = load();
    collect?.(options);
  };
}

function load(): Collect | undefined {
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
