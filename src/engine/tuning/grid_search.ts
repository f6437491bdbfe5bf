/**
 * Autotune's search: every candidate once (screening), then the best few head to head, in turn,
 * a few rounds (the final); the best mean of the final wins.
 *
 * Why a grid and not Horovod's Bayesian optimisation: 20 points of two small discrete axes are
 * cheap enough to visit, and the result does not depend on a model's priors. Why the final:
 * a trial's score is a wall-clock measurement on machines shared with other work, whose load
 * drifts over the seconds the screening takes; the finalists' samples, taken in turn over a short
 * span, meet the same load, and only they decide.
 */
import type { TunedSettings } from './tuned_settings.js';

export interface Scored {
  settings: TunedSettings;
  /** Mean of the samples that decided (bytes per second). */
  score: number;
  samples: number;
}

interface Candidate {
  settings: TunedSettings;
  screened: number | undefined;
  total: number;
  samples: number;
}

export class GridSearch {
  private readonly candidates: Candidate[];
  private readonly queue: Candidate[];
  private final = false;
  /** Trials handed out so far. */
  trials = 0;

  constructor(
    settings: readonly TunedSettings[],
    /** How many of the screening's best go to the final. */
    private readonly finalists = 3,
    /** Samples of each finalist in the final, taken in turn. */
    private readonly rounds = 2,
  ) {
    this.candidates = settings.map((s) => ({ settings: s, screened: undefined, total: 0, samples: 0 }));
    this.queue = [...this.candidates];
  }

  /** The next candidate to try, or undefined once the search is over. */
  next(): TunedSettings | undefined {
    if (this.queue.length === 0 && !this.final) {
      this.final = true;
      const top = this.ranked((c) => c.screened).slice(0, this.finalists);
      for (let r = 0; r < this.rounds; r++) this.queue.push(...top);
    }
    const next = this.queue[0];
    if (next === undefined) return undefined;
    this.trials++;
    return next.settings;
  }

  /** The score of the candidate next() returned last. */
  record(score: number): void {
    const c = this.queue.shift();
    if (c === undefined) return;
    if (!this.final) c.screened = score;
    else {
      c.total += score;
      c.samples++;
    }
  }

  /** The best so far (the final's mean once it has samples, else the screening's; the first of equals), or undefined before any score. */
  best(): Scored | undefined {
    const finalMean = (c: Candidate) => (c.samples > 0 ? c.total / c.samples : undefined);
    const inFinal = this.candidates.some((c) => c.samples > 0);
    const top = this.ranked(inFinal ? finalMean : (c) => c.screened)[0];
    if (!top) return undefined;
    return inFinal
      ? { settings: top.settings, score: top.total / top.samples, samples: top.samples }
      : { settings: top.settings, score: top.screened as number, samples: 1 };
  }

  /** Candidates with a score by `score`, best first; a stable sort, so the earlier of equals leads. */
  private ranked(score: (c: Candidate) => number | undefined): Candidate[] {
    return this.candidates.filter((c) => score(c) !== undefined).sort((a, b) => (score(b) as number) - (score(a) as number));
  }
}
