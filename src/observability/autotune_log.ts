/**
 * RINGREDUCE_AUTOTUNE_LOG: the CSV file rank 0 appends autotune's trials to (engine/tuning/),
 * Horovod's HOROVOD_AUTOTUNE_LOG. A line per trial (the settings tried, the score in bytes per
 * second, the window it was measured over) and a last `best` line with the choice. A log is not
 * worth a job: a write that fails is reported once through `warn`, and the log stops.
 */
import { appendFileSync, statSync } from 'node:fs';

export const kAutotuneLogHeader = 'trial,fusion_threshold_bytes,burst_hold_ms,score_bytes_per_s,collectives,bytes,window_ms';

/** A sink for autotune's lines into `path`, with the header first when the file is new or empty. */
export function openAutotuneLog(path: string, warn: (message: string) => void): (line: string) => void {
  let broken = false;
  const append = (line: string) => {
    if (broken) return;
    try {
      appendFileSync(path, `${line}\n`);
    } catch (error) {
      broken = true;
      warn(`autotune log ${path}: ${(error as Error).message}; no more lines are written`);
    }
  };
  let size = 0;
  try {
    size = statSync(path).size;
  } catch {}
  if (size === 0) append(kAutotuneLogHeader);
  return append;
}
