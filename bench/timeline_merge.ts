/** Merges the per-rank timeline files of a bench run into one trace (one process row per rank). */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { timelinePathFor } from '../src/observability/timeline.js';

/** Writes the events of ranks 0..n-1 to `out`; returns how many there were. */
export function mergeTimelines(base: string, ranks: number, out: string): number {
  const events: unknown[] = [];
  for (let r = 0; r < ranks; r++) {
    const path = ranks === 1 ? base : timelinePathFor(base, r);
    if (!existsSync(path)) continue;
    events.push(...(JSON.parse(readFileSync(path, 'utf8')) as unknown[]));
  }
  writeFileSync(out, JSON.stringify({ traceEvents: events, displayTimeUnit: 'ms' }));
  return events.length;
}
