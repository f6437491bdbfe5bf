/**
 * The page's timeline download: the ranks' Chrome traces (RINGREDUCE_TIMELINE, observability/
 * timeline.ts) merged into one trace of the last minutes, which Perfetto and chrome://tracing
 * open (one process row per rank). Only the files of ranks on this machine can be read, and
 * only what the engines have flushed (they append in batches, and close the array at shutdown):
 * a file still being written is read up to its last complete event.
 */
import { readFile } from 'node:fs/promises';

export const kTimelineWindowMs = 5 * 60_000;

interface TraceEvent {
  ph?: string;
  ts?: number;
}

/** The events of a trace file, complete or still open. */
export function parseTraceEvents(text: string): TraceEvent[] {
  const trimmed = text.trim();
  if (trimmed.endsWith(']')) {
    try {
      return JSON.parse(trimmed) as TraceEvent[];
    } catch {
      // Fall through: cut at the last complete event.
    }
  }
  const last = trimmed.lastIndexOf('}');
  if (last < 0) return [];
  try {
    return JSON.parse(`${trimmed.slice(0, last + 1)}]`) as TraceEvent[];
  } catch {
    return [];
  }
}

/**
 * The merged trace of the ranks' timeline `files` (each rank reports its own): metadata events
 * and the events of the last `windowMs` before `nowMs` (events carry µs since the epoch).
 */
export async function mergedTimeline(files: readonly string[], nowMs: number, windowMs = kTimelineWindowMs) {
  const fromUs = (nowMs - windowMs) * 1000;
  const traceEvents: TraceEvent[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      continue;
    }
    for (const event of parseTraceEvents(text)) if (event.ph === 'M' || (event.ts ?? 0) >= fromUs) traceEvents.push(event);
  }
  return { traceEvents, displayTimeUnit: 'ms' };
}
