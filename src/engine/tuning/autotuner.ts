/**
 * Autotune on the world's rank 0: runs the search's trials one after another while the job
 * runs, scores each, and publishes the next settings (or, at the end, the best) as a change that
 * travels with rank 0's decisions.
 *
 * How a trial is scored: once every rank runs the trial's settings (rank 0 has applied the
 * change, at its place in the agreed order), the first `warmupCollectives` completions are let
 * pass: collectives planned under the previous settings may still be running, and a changed
 * hold shifts the phase of the caller's steps. Then the window opens, and closes once it holds
 * at least `sampleCollectives` completions and `minSampleMs` of wall time; the score is the
 * bytes of this rank's tensors the window completed per second of wall time. Wall time, not the
 * algorithms' time: what a setting saves or costs is mostly waiting (a hold, a round per
 * unfused tensor), and a step-bound job runs as fast as its collectives complete.
 */
import { GridSearch } from './grid_search.js';
import { describe, gridOf, type SettingsChange, type TunedSettings } from './tuned_settings.js';

/** A trial's window of completions. */
export interface Window {
  collectives: number;
  bytes: number;
  ms: number;
}

export interface AutotuneOptions {
  /** Completions let pass after a change before the window opens (default 200). */
  warmupCollectives?: number;
  /** Completions let pass at the start of the job before the first window (default 1000: code and caches are cold then). */
  startWarmupCollectives?: number;
  /** Completions a window holds at least (default 500). */
  sampleCollectives?: number;
  /** Wall time a window spans at least (default 250 ms). */
  minSampleMs?: number;
  /** How many of the screening's best go to the final (default 3), and its rounds (default 2): grid_search.ts. */
  finalists?: number;
  finalRounds?: number;
  /** A trial's score from its window; default bytes per second. Tests give a deterministic one. */
  score?: (settings: TunedSettings, window: Window) => number;
  /** Receives a CSV line per trial and one for the choice (observability/autotune_log.ts writes them to a file). */
  log?: (line: string) => void;
}

export interface AutotunerHooks {
  /** Sends a change to every rank of the world, this one included, in the agreed order. */
  publish(change: SettingsChange): void;
  info(message: string): void;
}

type Phase = 'warmup' | 'window' | 'switching' | 'done';

export class Autotuner {
  private readonly search: GridSearch;
  private readonly warmup: number;
  private readonly sample: number;
  private readonly minMs: number;
  private current: TunedSettings | undefined;
  private phase: Phase = 'warmup';
  private passed = 0;
  /** Completions the current warm-up lets pass. */
  private toPass: number;
  private window: Window & { startMs: number } = { collectives: 0, bytes: 0, ms: 0, startMs: 0 };

  constructor(
    start: TunedSettings,
    private readonly options: AutotuneOptions,
    private readonly hooks: AutotunerHooks,
  ) {
    this.search = new GridSearch(gridOf(start), options.finalists ?? 3, options.finalRounds ?? 2);
    this.warmup = options.warmupCollectives ?? 200;
    this.sample = options.sampleCollectives ?? 500;
    this.minMs = options.minSampleMs ?? 250;
    this.toPass = options.startWarmupCollectives ?? 1000;
    // The configured settings are in force already: the first trial needs no change.
    this.current = this.search.next();
    hooks.info(`autotune: trial 1: ${describe(start)}`);
  }

  /** An execution of the world completed `collectives` of this rank's calls, `bytes` of tensors. */
  completed(collectives: number, bytes: number): void {
    if (this.phase === 'warmup') {
      this.passed += collectives;
      if (this.passed >= this.toPass) {
        this.phase = 'window';
        this.window = { collectives: 0, bytes: 0, ms: 0, startMs: performance.now() };
      }
      return;
    }
    if (this.phase !== 'window') return;
    const w = this.window;
    w.collectives += collectives;
    w.bytes += bytes;
    w.ms = performance.now() - w.startMs;
    if (w.collectives >= this.sample && w.ms >= this.minMs) this.endTrial();
  }

  /** A change reached its place in the agreed order on this rank: every rank runs it from here. */
  applied(change: SettingsChange): void {
    if (change.done) {
      this.phase = 'done';
      return;
    }
    this.phase = 'warmup';
    this.passed = 0;
    this.toPass = this.warmup;
  }

  private endTrial(): void {
    const settings = this.current as TunedSettings;
    const { collectives, bytes, ms } = this.window;
    const score = this.options.score ? this.options.score(settings, this.window) : ms > 0 ? (bytes * 1000) / ms : 0;
    this.search.record(score);
    const trial = this.search.trials;
    this.options.log?.(
      `${trial},${settings.fusionThresholdBytes},${settings.burstHoldMs},${score.toFixed(0)},${collectives},${bytes},${ms.toFixed(1)}`,
    );
    this.hooks.info(`autotune: trial ${trial}: ${describe(settings)}: ${(score / 1e6).toFixed(2)} MB/s`);
    this.phase = 'switching';
    this.current = this.search.next();
    if (this.current) {
      this.hooks.publish({ ...this.current, trial: this.search.trials, done: false, score: 0 });
      return;
    }
    const best = this.search.best();
    if (!best) return;
    this.options.log?.(`best,${best.settings.fusionThresholdBytes},${best.settings.burstHoldMs},${best.score.toFixed(0)},,,`);
    this.hooks.info(`autotune: done after ${trial} trials: ${describe(best.settings)} (${(best.score / 1e6).toFixed(2)} MB/s)`);
    this.hooks.publish({ ...best.settings, trial, done: true, score: best.score });
  }
}
