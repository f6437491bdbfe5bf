/** Merges the per-rank timeline files of a bench run into one trace (src/observability/timeline_merge.ts). */
import { mergeTimelineFiles, rankTimelinePaths } from '../src/observability/timeline_merge.js';

/** Writes the events of ranks 0..n-1 to `out`; returns how many there were. */
export function mergeTimelines(base: string, ranks: number, out: string): number {
  const all = Array.from({ length: ranks }, (_, rank) => rank);
  return mergeTimelineFiles(rankTimelinePaths(base, all, ranks), out).events;
}
