/**
 * Merging the per-rank timelines (timeline.ts) into one trace: `ringrun --timeline FILE` and
 * `npm run bench -- --timeline FILE` write one file that Perfetto (ui.perfetto.dev) and
 * chrome://tracing open with one process row per rank, on one clock (each rank's events carry
 * wall-clock microseconds, so ranks of one host line up; across hosts, as well as their clocks
 * agree).
 *
 * A rank that was killed leaves its file without the closing bracket (and without the events it
 * had not flushed yet): what it wrote is still read. The output is the JSON Object Format of the
 * trace event format: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { timelinePathFor } from './timeline.js';

export interface MergeResult {
  /** Events written. */
  events: number;
  /** The inputs that did not exist (a rank that never started its engine, or ran elsewhere). */
  missing: string[];
  /** The inputs that could not be read as a trace, with why. */
  unreadable: string[];
}

/** The files the ranks 0 … size-1 of a job write for `path` (as the engine names them). */
export function rankTimelinePaths(path: string, ranks: readonly number[], size: number): string[] {
  return ranks.map((rank) => (size === 1 ? path : timelinePathFor(path, rank)));
}

/** The events of one rank's timeline file, also when it was cut short. */
export function readTimeline(path: string): unknown[] {
  const text = readFileSync(path, 'utf8').trimEnd();
  if (text === '') return [];
  try {
    return JSON.parse(text) as unknown[];
  } catch {
    // Cut short: whole events (each written on its own line), but no closing bracket.
    const lines = text.split('\n');
    for (let keep = lines.length; keep > 0; keep--) {
      const candidate = `${lines.slice(0, keep).join('\n').replace(/,\s*$/, '')}\n]`;
      try {
        return JSON.parse(candidate) as unknown[];
      } catch {}
    }
    throw new Error('not a timeline (a JSON array of trace events)');
  }
}

/** Writes the events of every file of `inputs` that exists to `out`, as one trace. */
export function mergeTimelineFiles(inputs: readonly string[], out: string): MergeResult {
  const events: unknown[] = [];
  const missing: string[] = [];
  const unreadable: string[] = [];
  for (const path of inputs) {
    if (!existsSync(path)) {
      missing.push(path);
      continue;
    }
    try {
      for (const event of readTimeline(path)) events.push(event);
    } catch (error) {
      unreadable.push(`${path}: ${(error as Error).message}`);
    }
  }
  writeFileSync(out, JSON.stringify({ traceEvents: events, displayTimeUnit: 'ms' }));
  return { events: events.length, missing, unreadable };
}
