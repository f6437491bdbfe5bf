/**
 * model.fit callback: ramps the learning rate from the single-rank rate to the scaled rate
 * over the first epochs (see warmup_schedule.ts), updated before every batch.
 */
import * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../index.js';
import { setLearningRate } from './learning_rate.js';
import { collectivesOf, type ProcessSetOption, type RuntimeOption, scopeOf } from './runtime.js';
import { type WarmupSpec, warmupLearningRate } from './warmup_schedule.js';

/** Options of {@link LearningRateWarmupCallback}: the rate to reach, and over how many epochs. */
export interface LearningRateWarmupOptions extends RuntimeOption, ProcessSetOption {
  /** The rate after warm-up: the single-rank rate × size (the process set's size, with one). */
  initialLearningRate: number;
  /** Epochs of warm-up (default 5). */
  warmupEpochs?: number;
  /** Batches per epoch; default: from fit()'s parameters, or counted during the first epoch. */
  stepsPerEpoch?: number;
  /** Print on rank 0 when warm-up ends (default false). */
  verbose?: boolean;
}

/**
 * Ramps the model's learning rate linearly from `initialLearningRate / size` (the single-rank
 * rate) to `initialLearningRate` over the first `warmupEpochs` epochs, setting it before every
 * batch, then keeps it there (Goyal et al., "Accurate, Large Minibatch SGD", as Horovod's
 * Keras callback does): starting large-batch training at the scaled rate diverges early on.
 *
 * @example
 * const lr = 0.001 * rr.size();
 * callbacks: [new LearningRateWarmupCallback({ initialLearningRate: lr, warmupEpochs: 3 })]
 */
export class LearningRateWarmupCallback extends tf.Callback {
  private readonly spec: WarmupSpec;
  private readonly verbose: boolean;
  private readonly rank: number;
  private steps: number | undefined;
  private epoch = 0;
  private batchesSeen = 0;
  private finished = false;

  /**
   * A callback to pass to `model.fit` on every rank, each with the same options.
   * @param options the rate after warm-up (required), the warm-up's length in epochs, batches per epoch
   * @throws InvalidArgumentError if `initialLearningRate` is not a number above 0, `warmupEpochs`
   * is negative, `stepsPerEpoch` is not a positive integer, or `processSet` does not hold this rank
   */
  constructor(options: LearningRateWarmupOptions) {
    super();
    const { initialLearningRate: target, warmupEpochs = 5, stepsPerEpoch } = options;
    if (!Number.isFinite(target) || target <= 0) throw new InvalidArgumentError(`initialLearningRate must be > 0, got ${target}`);
    if (!Number.isFinite(warmupEpochs) || warmupEpochs < 0)
      throw new InvalidArgumentError(`warmupEpochs must be >= 0, got ${warmupEpochs}`);
    if (stepsPerEpoch !== undefined && !(Number.isSafeInteger(stepsPerEpoch) && stepsPerEpoch > 0)) {
      throw new InvalidArgumentError(`stepsPerEpoch must be a positive integer, got ${stepsPerEpoch}`);
    }
    const scope = scopeOf(collectivesOf(options), options.processSet);
    this.spec = { target, size: scope.size, warmupEpochs };
    this.rank = scope.rank;
    this.steps = stepsPerEpoch;
    this.verbose = options.verbose ?? false;
  }

  /** Called by `model.fit` as training starts: takes the batches per epoch from its parameters unless given. */
  override async onTrainBegin(): Promise<void> {
    this.steps ??= stepsFromParams(this.params);
  }

  /** Called by `model.fit` as epoch `epoch` (from 0) starts. */
  override async onEpochBegin(epoch: number): Promise<void> {
    this.epoch = epoch;
    this.batchesSeen = 0;
  }

  /** Called by `model.fit` before each batch: sets the learning rate for the fraction of warm-up done. */
  override async onBatchBegin(batch: number): Promise<void> {
    this.batchesSeen = batch + 1;
    if (this.finished) return;
    if (this.epoch >= this.spec.warmupEpochs) {
      setLearningRate(this.model.optimizer, this.spec.target);
      this.finished = true;
      if (this.verbose && this.rank === 0) {
        console.log(`Epoch ${this.epoch + 1}: finished learning rate warm-up to ${this.spec.target}`);
      }
      return;
    }
    const progress = this.steps ? this.epoch + batch / this.steps : this.epoch;
    setLearningRate(this.model.optimizer, warmupLearningRate(this.spec, progress));
  }

  /** Called by `model.fit` after each epoch: without a known number of batches per epoch, takes the first epoch's. */
  override async onEpochEnd(): Promise<void> {
    this.steps ??= this.batchesSeen || undefined;
  }
}

function stepsFromParams(params: unknown): number | undefined {
  const p = (params ?? {}) as { steps?: unknown; samples?: unknown; batchSize?: unknown };
  if (typeof p.steps === 'number' && p.steps > 0) return p.steps;
  if (typeof p.samples === 'number' && typeof p.batchSize === 'number' && p.batchSize > 0) {
    return Math.ceil(p.samples / p.batchSize);
  }
  return undefined;
}
