/**
 * DistributedOptimizer: wraps any tf.Optimizer so that every step applies the gradients
 * averaged over all ranks (or over the ranks of a process set). Each step's gradients are fused
 * into one Float32Array and reduced by ONE allreduce, then split back and handed to the wrapped
 * optimizer, so all ranks apply identical updates and their weights stay identical.
 *
 * model.fit calls optimizer.minimize() synchronously and disposes the gradients as soon as it
 * returns, so applyGradients() uses ringreduce's synchronous allreduce (it blocks this thread
 * only while the engine worker runs the ring). Custom training loops can use minimizeAsync()
 * or applyGradientsAsync() and keep the event loop free during the exchange.
 *
 * With backwardPassesPerStep k > 1, a step spans k calls: each call adds its gradients into the
 * fused buffer (no tensor is made), and the k-th reduces the sum and applies it. By default the
 * sum is divided by k first, so that a step applies the mean gradient of its k batches: k
 * batches of B samples then update the weights as one batch of k·B would, and the learning
 * rate tuned for that batch applies unchanged. (Horovod's Keras optimizer applies the plain sum
 * unless average_aggregated_gradients=True; `averageAggregatedGradients: false` does the same.)
 *
 * The fused buffer is shared memory kept from step to step and reduced in place: no copy into
 * the engine's memory, and no fresh memory per step, whose first touch costs more than the
 * copy here (page faults at 0.28 GB/s). The reduced gradients made from it are disposed before
 * the step returns, so the next step may overwrite it.
 */
import * as tf from '@tensorflow/tfjs';
import { type AllreduceOptions, type Compression, InvalidArgumentError } from '../../index.js';
import { disposeGradients, GradientBundle, type Gradients, type NamedTensor } from './gradient_bundle.js';
import { getLearningRate, setLearningRate } from './learning_rate.js';
import { type Collectives, collectivesOf, type ProcessSetOption, type RuntimeOption, type Scope, scopeOf } from './runtime.js';

/** Options of {@link DistributedOptimizer}: how the ranks' gradients are combined, and how often. */
export interface DistributedOptimizerOptions extends RuntimeOption, ProcessSetOption {
  /** Name of the fused gradient collective; give each DistributedOptimizer of a job its own. */
  name?: string;
  /**
   * 'average' (default) or 'sum' of the ranks' gradients, or 'adasum' (Horovod's Adasum: each
   * gradient tensor combined on its own by adaptive summation, which sums orthogonal gradients
   * and averages equal ones; a power-of-two number of ranks). Under 'adasum' a step exchanges
   * one allreduce per gradient tensor: the async methods submit them together and the engine
   * fuses them; applyGradients (model.fit) runs them one after another.
   */
  op?: 'average' | 'sum' | 'adasum';
  /**
   * Calls of the optimizer per update (Horovod's backward_passes_per_step; default 1): the
   * gradients of k calls (applyGradients, minimize or their async forms; one per batch inside
   * model.fit) are summed on this rank, and every k-th call exchanges the sum in one allreduce
   * and applies it. The other calls apply nothing.
   */
  backwardPassesPerStep?: number;
  /**
   * Divide the sum of the k calls' gradients by k before the exchange, so that an update
   * applies their mean (default true). false applies the sum, as Horovod's Keras optimizer does
   * by default.
   */
  averageAggregatedGradients?: boolean;
  /**
   * 'fp16' sends the gradients as IEEE half precision (Horovod's Compression.fp16): half the
   * bytes per step, summed in float32 at each step of the reduction, applied as float32.
   * Gradients beyond ±65504 become ±Infinity and those below 2^-24 zero (scale the loss if
   * yours do). Every rank must pass the same. Default 'none'.
   */
  compression?: Compression;
}

/** The gradients of the calls of a step so far, summed in `flat`. */
interface Window {
  flat: Float32Array;
  passes: number;
  signature: string;
}

/**
 * @example
 * const optimizer = new DistributedOptimizer(tf.train.adam(0.001 * rr.size()));
 * model.compile({ optimizer, loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
 * await model.fit(xs, ys, { callbacks: [new BroadcastGlobalVariablesCallback(0)] });
 */
export class DistributedOptimizer extends tf.Optimizer {
  /**
   * tf.Optimizer answers `instanceof` by duck typing (any object with minimize, ...), and
   * subclasses inherit that; a DistributedOptimizer is recognised by its private brand instead.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && #brand in value;
  }

  readonly #brand = true;
  readonly optimizer: tf.Optimizer;
  /** Calls of the optimizer per update (option backwardPassesPerStep). */
  readonly backwardPassesPerStep: number;
  private readonly collectives: Collectives;
  private readonly options: DistributedOptimizerOptions;
  private readonly name: string;
  private readonly op: 'average' | 'sum' | 'adasum';
  /** What the accumulated sum is multiplied by before the exchange: 1/k or 1. */
  private readonly scale: number;
  /** Where the gradients are reduced; known at the first step (or at construction, with a process set). */
  private where: Scope | undefined;
  /** The fused gradients' buffer, reused by the next step unless a step still holds it. */
  private flat: Float32Array | undefined;
  private flatInUse = false;
  /** The step being accumulated, when backwardPassesPerStep > 1 and some of its calls were made. */
  private window: Window | undefined;

  /**
   * Wraps `optimizer`, which then applies what the ranks' gradients average to (or sum to, with
   * `op: 'sum'`). Every rank must wrap the same kind of optimizer with the same options.
   * @param optimizer the optimizer that applies the combined gradients (any `tf.Optimizer`, not a DistributedOptimizer)
   * @param options how the gradients are combined and how often; all optional
   * @throws InvalidArgumentError if `optimizer` is not a `tf.Optimizer` or is already wrapped, or
   * an option is invalid (`op` other than 'average', 'sum' or 'adasum', `backwardPassesPerStep` not a
   * positive integer, `averageAggregatedGradients` not a boolean, `compression` other than 'none'
   * or 'fp16'), or `processSet` does not hold this rank
   */
  constructor(optimizer: tf.Optimizer, options: DistributedOptimizerOptions = {}) {
    super();
    if (!(optimizer instanceof tf.Optimizer)) throw new InvalidArgumentError('optimizer must be a tf.Optimizer');
    if (optimizer instanceof DistributedOptimizer) throw new InvalidArgumentError('optimizer is already a DistributedOptimizer');
    const op = options.op ?? 'average';
    if (op !== 'average' && op !== 'sum' && op !== 'adasum') {
      throw new InvalidArgumentError(`op must be 'average', 'sum' or 'adasum', got ${String(op)}`);
    }
    const passes = options.backwardPassesPerStep ?? 1;
    if (!Number.isSafeInteger(passes) || passes < 1) {
      throw new InvalidArgumentError(`backwardPassesPerStep must be a positive integer, got ${String(passes)}`);
    }
    const average = options.averageAggregatedGradients ?? true;
    if (typeof average !== 'boolean') {
      throw new InvalidArgumentError(`averageAggregatedGradients must be a boolean, got ${String(average)}`);
    }
    const compression = options.compression ?? 'none';
    if (compression !== 'none' && compression !== 'fp16') {
      throw new InvalidArgumentError(`compression must be 'none' or 'fp16', got ${String(compression)}`);
    }
    this.optimizer = optimizer;
    this.options = options;
    this.collectives = collectivesOf(options);
    this.name = options.name ?? 'DistributedOptimizer.gradients';
    this.op = op;
    this.backwardPassesPerStep = passes;
    this.scale = average ? 1 / passes : 1;
    if (options.processSet !== undefined) this.where = scopeOf(this.collectives, options.processSet);
  }

  override computeGradients(f: () => tf.Scalar, varList?: tf.Variable[]): { value: tf.Scalar; grads: tf.NamedTensorMap } {
    return this.optimizer.computeGradients(f, varList);
  }

  /**
   * Averages `variableGradients` across ranks (blocking), then applies them; with
   * backwardPassesPerStep k, adds them to the step's sum and does so at every k-th call only.
   */
  override applyGradients(variableGradients: tf.NamedTensorMap | NamedTensor[]): void {
    if (this.backwardPassesPerStep === 1 && this.scope().size === 1) {
      this.optimizer.applyGradients(variableGradients);
      return;
    }
    const bundle = new GradientBundle(variableGradients);
    const flat = this.accumulate(bundle, bundle.readSync());
    if (flat === undefined) return;
    try {
      if (this.scope().size > 1)
        for (const [part, options] of this.exchanges(bundle, flat)) this.collectives.allreduceSync(part, options);
      else scaleInPlace(flat, this.scale);
      this.applyReduced(bundle, flat);
    } finally {
      this.giveFlat(flat);
    }
  }

  /** applyGradients without blocking the thread during the exchange. */
  async applyGradientsAsync(variableGradients: Gradients): Promise<void> {
    if (this.backwardPassesPerStep === 1 && this.scope().size === 1) {
      this.optimizer.applyGradients(variableGradients);
      return;
    }
    const bundle = new GradientBundle(variableGradients);
    const flat = this.accumulate(bundle, await bundle.read());
    if (flat === undefined) return;
    try {
      if (this.scope().size > 1) {
        await Promise.all(this.exchanges(bundle, flat).map(([part, options]) => this.collectives.allreduce(part, options)));
      } else scaleInPlace(flat, this.scale);
      this.applyReduced(bundle, flat);
    } finally {
      this.giveFlat(flat);
    }
  }

  /**
   * Adds one call's gradients to the step's sum; the sum once the step has all its calls (the
   * caller reduces it, applies it and gives the buffer back), else undefined.
   */
  private accumulate(bundle: GradientBundle, parts: Float32Array[]): Float32Array | undefined {
    const k = this.backwardPassesPerStep;
    const window = this.window;
    if (window === undefined) {
      const flat = bundle.layout.pack(parts, this.takeFlat(bundle.layout.total));
      if (k === 1) return flat;
      this.window = { flat, passes: 1, signature: bundle.signature };
      return undefined;
    }
    const signature = bundle.signature;
    if (signature !== window.signature) {
      this.window = undefined;
      this.giveFlat(window.flat);
      throw new InvalidArgumentError(
        `backwardPassesPerStep ${k}: call ${window.passes + 1} of a step passed other gradients [${signature}] than its ` +
          `first call [${window.signature}]; the step's accumulated gradients are dropped`,
      );
    }
    bundle.layout.accumulate(parts, window.flat);
    window.passes++;
    if (window.passes < k) return undefined;
    this.window = undefined;
    return window.flat;
  }

  /**
   * Forgets what depends on the job's membership: the rank and size it reduces over, and the
   * gradients of a step only partly accumulated (backwardPassesPerStep). Call it after a change of
   * membership (elastic training: rrtf.elastic.TfjsState calls it on every reset).
   */
  reset(): void {
    this.where = this.options.processSet === undefined ? undefined : scopeOf(this.collectives, this.options.processSet);
    this.window = undefined;
  }

  /**
   * The step's allreduces, in place: the whole fused buffer, or under adasum one per gradient
   * (Adasum's coefficients are per tensor, as Horovod's: one over the whole model would weigh
   * every layer by the others).
   */
  private exchanges(bundle: GradientBundle, flat: Float32Array): [Float32Array, AllreduceOptions][] {
    if (this.op !== 'adasum') return [[flat, this.reduceOptions(flat, this.name)]];
    return bundle.layout.unpack(flat).map((part, i) => [part, this.reduceOptions(part, `${this.name}/${i}`)]);
  }

  private reduceOptions(flat: Float32Array, name: string): AllreduceOptions {
    const options: AllreduceOptions = { name, op: this.op, out: flat, ...this.scope().options };
    if (this.scale !== 1) options.postscale = this.scale;
    if (this.options.compression === 'fp16') options.compression = 'fp16';
    return options;
  }

  private scope(): Scope {
    this.where ??= scopeOf(this.collectives, this.options.processSet);
    return this.where;
  }

  /** The kept buffer when it is free and of the right length, else a new one (kept from now on). */
  private takeFlat(length: number): Float32Array {
    if (this.flatInUse) return new Float32Array(new SharedArrayBuffer(length * 4));
    if (this.flat?.length !== length) this.flat = new Float32Array(new SharedArrayBuffer(length * 4));
    this.flatInUse = true;
    return this.flat;
  }

  private giveFlat(flat: Float32Array): void {
    if (flat === this.flat) this.flatInUse = false;
  }

  /**
   * minimize() for custom training loops: computes the gradients of `f`, averages them across
   * ranks without blocking the thread, applies them.
   *
   * @example
   * for (const batch of batches) {
   *   const loss = await optimizer.minimizeAsync(() => lossOf(model, batch), true);
   *   loss?.dispose();
   * }
   */
  async minimizeAsync(f: () => tf.Scalar, returnCost = false, varList?: tf.Variable[]): Promise<tf.Scalar | null> {
    const { value, grads } = this.computeGradients(f, varList);
    try {
      const ordered = varList ? varList.map((v) => ({ name: v.name, tensor: grads[v.name] as tf.Tensor })) : grads;
      await this.applyGradientsAsync(ordered);
    } catch (error) {
      value.dispose();
      throw error;
    } finally {
      tf.dispose(grads);
    }
    if (returnCost) return value;
    value.dispose();
    return null;
  }

  private applyReduced(bundle: GradientBundle, reduced: Float32Array): void {
    const averaged = bundle.unpack(reduced);
    try {
      this.optimizer.applyGradients(averaged);
    } finally {
      disposeGradients(averaged);
    }
  }

  /** Updates applied so far: one per backwardPassesPerStep calls. */
  override get iterations(): number {
    return this.optimizer.iterations;
  }

  /**
   * The wrapped optimizer's learning rate.
   * @throws InvalidArgumentError if the wrapped optimizer has no numeric learning rate
   */
  get learningRate(): number {
    return getLearningRate(this.optimizer);
  }

  /**
   * Sets the wrapped optimizer's learning rate (as the adapter's `setLearningRate(optimizer, rate)`
   * does), for example to scale it by the number of ranks.
   * @param rate the new rate: a finite number, 0 or more
   * @throws InvalidArgumentError if `rate` is negative or not finite, or the optimizer has no learning rate to set
   * @example optimizer.setLearningRate(0.001 * rr.size());
   */
  setLearningRate(rate: number): void {
    setLearningRate(this.optimizer, rate);
  }

  override dispose(): void {
    this.optimizer.dispose();
  }

  /** The wrapped optimizer's state (its slots and iteration count), as `tf.Optimizer.getWeights` gives it; what a checkpoint saves. */
  override async getWeights(): Promise<NamedTensor[]> {
    return this.optimizer.getWeights();
  }

  /**
   * Sets the wrapped optimizer's state, as `tf.Optimizer.setWeights` does (a loaded checkpoint's,
   * say). It changes this rank only: {@link broadcastOptimizerState} gives every rank the root's.
   */
  override async setWeights(weightValues: NamedTensor[]): Promise<void> {
    return this.optimizer.setWeights(weightValues);
  }

  /** Saved models record the wrapped optimizer, so they load without ringreduce. */
  override getClassName(): string {
    return this.optimizer.getClassName();
  }

  override getConfig(): tf.serialization.ConfigDict {
    return this.optimizer.getConfig();
  }
}

/** Multiplies `values` by `factor` (a job of one rank, where no allreduce scales them). */
function scaleInPlace(values: Float32Array, factor: number): void {
  if (factor === 1) return;
  for (let i = 0; i < values.length; i++) values[i] = (values[i] as number) * factor;
}
