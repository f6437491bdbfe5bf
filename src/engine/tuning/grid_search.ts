/**
 * Autotune's search: every candidate once, then the best few again, and the best mean wins.
 *
 * Why a grid and not Horovod's Bayesian optimisation: 20 points of two small discrete axes are
 * cheap enough to visit, and the result does not depend on a model's priors. Why the second
 * pass: a trial's score is a wall-clock measurement on machines shared with other work; sampling
 * the leaders twice keeps one lucky window from deciding the job's settings.
 */
import type { TunedSettings } from './tuned_settings.js';

export interface Scored {
  settings: TunedSettings;
  /** Mean of its samples (bytes per second). */
  score: number;
  samples: number;
}

export class GridSearch {
  private readonly scored: { settings: TunedSettings; total: number; samples: number }[];
  private readonly queue: number[];
  private confirming = false;
  /** Trials handed out so far. */
  trials = 0;

  constructor(
    candidates: readonly TunedSettings[],
    /** How many of the best are sampled a second time. */
    private readonly confirm = 3,
  ) {
    this.scored = candidates.map((settings) => ({ settings, total: 0, samples: 0 }));
    this.queue = candidates.map((_, i) => i);
  }

  /** The next candidate to try, or undefined once the search is over. */
  next(): TunedSettings | undefined {
    if (this.queue.length === 0 && !this.confirming) {
      this.confirming = true;
      this.queue.push(
        ...this.ranked()
          .slice(0, this.confirm)
          .map((s) => this.scored.indexOf(s)),
      );
    }
    const at = this.queue[0];
    if (at === undefined) return undefined;
    this.trials++;
    return (this.scored[at] as { settings: TunedSettings }).settings;
  }

  /** The score of the candidate next() returned last. */
  record(score: number): void {
    const at = this.queue.shift();
    if (at === undefined) return;
    const entry = this.scored[at] as { total: number; samples: number };
    entry.total += score;
    entry.samples++;
  }

  /** The best mean so far (the first of equals), or undefined before any score. */
  best(): Scored | undefined {
    const top = this.ranked()[0];
    return top && { settings: top.settings, score: top.total / top.samples, samples: top.samples };
  }

  private ranked() {
    // A stable sort: among equal means, the earlier candidate (the configured settings first) wins.
    return this.scored.filter((s) => s.samples > 0).sort((a, b) => b.total / b.samples - a.total / a.samples);
  }
}
