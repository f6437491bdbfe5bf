/** What autotune changes while a job runs (grid_search.ts, autotuner.ts), and how a change travels. */

/** The settings autotune tries: the world's fusion threshold and the burst hold. */
export interface TunedSettings {
  fusionThresholdBytes: number;
  burstHoldMs: number;
}

/**
 * A change rank 0 publishes with its decisions (rank0_decisions.ts): the settings every rank runs
 * with from that place of the agreed order on, and where the search stands.
 */
export interface SettingsChange extends TunedSettings {
  /** Trials begun so far, this one included; with `done`, the trials run. */
  trial: number;
  /** The search has ended and these are the settings it chose, kept for the rest of the job. */
  done: boolean;
  /** With `done`: the chosen settings' score (bytes per second); otherwise 0. */
  score: number;
}

const kMiB = 1024 * 1024;
/** Fusion thresholds tried: off, then 1 to 64 MiB (Horovod's default is 64, ours 16). */
export const kFusionThresholdGrid: readonly number[] = [0, kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB];
/** Burst holds tried, in ms (0: report at once). */
export const kBurstHoldGrid: readonly number[] = [0, 1, 2, 5];

/**
 * The candidates, the configured settings first (they are in force when the job starts, so the
 * first trial needs no change), then the grid in order (fusion threshold outer).
 */
export function gridOf(start: TunedSettings): TunedSettings[] {
  const grid: TunedSettings[] = [{ ...start }];
  for (const fusionThresholdBytes of kFusionThresholdGrid) {
    for (const burstHoldMs of kBurstHoldGrid) {
      if (fusionThresholdBytes !== start.fusionThresholdBytes || burstHoldMs !== start.burstHoldMs) {
        grid.push({ fusionThresholdBytes, burstHoldMs });
      }
    }
  }
  return grid;
}

/** The largest threshold autotune may set: the executor's pool keeps that much fusion buffer. */
export function largestThreshold(start: TunedSettings): number {
  return Math.max(start.fusionThresholdBytes, ...kFusionThresholdGrid);
}

export function describe(settings: TunedSettings): string {
  const t = settings.fusionThresholdBytes;
  const threshold = t === 0 ? 'off' : t % kMiB === 0 ? `${t / kMiB} MiB` : `${t} bytes`;
  return `fusion threshold ${threshold}, burst hold ${settings.burstHoldMs} ms`;
}
