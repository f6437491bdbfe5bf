/**
 * `rrtf.elastic.TfjsState`: the elastic state (docs/elastic.md) of a TensorFlow.js training loop.
 * Besides the plain values of `rr.elastic.ObjectState` (epoch, batch...), it commits, restores and
 * syncs a model's weights (trainable or not) and its optimizer's slots (Adam's moments, the
 * iteration count...). A commit copies them into typed arrays, reused from commit to commit: no
 * tensor is kept, so `tf.memory().numTensors` does not grow with the commits.
 *
 * Built on the core's State (elastic/state.ts): `commit()` captures the model and then lets the
 * core commit the values and notice new workers; `restore()` puts the captured values back;
 * `sync()` gives every rank rank 0's values, weights and slots.
 */
import * as tf from '@tensorflow/tfjs';
import { RingReduceError } from '../../core/errors.js';
import { State, type StateOptions } from '../../elastic/state.js';
import { DistributedOptimizer } from './distributed_optimizer.js';

export type { StateOptions } from '../../elastic/state.js';

/** What TfjsState keeps besides the plain values; both are optional. */
export interface TfjsStateValues {
  /** The model whose weights (`model.weights`, trainable or not) are committed, restored and synced. */
  model?: tf.LayersModel;
  /**
   * The optimizer whose slots (`optimizer.getWeights()`: iteration count, moments...) are
   * committed, restored and synced. Default: `model.optimizer` once the model is compiled.
   */
  optimizer?: tf.Optimizer;
}

type Values = Float32Array | Int32Array | Uint8Array;

/** One tensor's values, copied out of tfjs. */
interface Saved {
  name: string;
  shape: number[];
  dtype: tf.DataType;
  values: Values;
}

/** The model's weights and the optimizer's slots at one point. */
interface Snapshot {
  weights: Saved[];
  /** undefined: no optimizer to save. */
  slots: Saved[] | undefined;
}

class TfjsStateBase<T extends TfjsStateValues> extends State<T> {
  readonly model: tf.LayersModel | undefined;
  readonly #optimizer: tf.Optimizer | undefined;
  /** The weights and slots of the last commit (or of the first sync, which elastic.run makes before any step). */
  #committed: Snapshot | undefined;
  /** A restore of the optimizer's slots in progress (tfjs sets them asynchronously). */
  #restoring: Promise<void> = Promise.resolve();

  constructor(values: T, options: StateOptions = {}) {
    const { model, optimizer, ...rest } = values;
    if (model !== undefined && !(model instanceof tf.LayersModel)) {
      throw new RingReduceError('TfjsState: model must be a tf.LayersModel');
    }
    if (optimizer !== undefined && !(optimizer instanceof tf.Optimizer)) {
      throw new RingReduceError('TfjsState: optimizer must be a tf.Optimizer');
    }
    // The core copies the plain values only; the model and the optimizer are this class's.
    super(rest as T, options);
    this.model = model;
    this.#optimizer = optimizer;
  }

  /** The optimizer whose slots the state keeps: the one given, else the model's once compiled. */
  get optimizer(): tf.Optimizer | undefined {
    return this.#optimizer ?? (this.model as { optimizer?: tf.Optimizer } | undefined)?.optimizer;
  }

  /**
   * Copies the model's weights and the optimizer's slots (into the previous commit's arrays when
   * they fit), then commits the values and asks for new workers (the core's commit; it may throw
   * HostsUpdatedInterrupt, once everything is committed). A collective: every rank commits at the
   * same points.
   */
  override async commit(): Promise<void> {
    await this.#restoring;
    this.#committed = await this.#capture(this.#committed);
    await super.commit();
  }

  /**
   * Goes back to the last commit: the values and the model's weights at once, the optimizer's
   * slots by the time the returned promise resolves (elastic.run does not wait for it, but its
   * next step, sync(), does).
   */
  override restore(): Promise<void> {
    super.restore();
    const committed = this.#committed;
    if (committed === undefined) return this.#restoring;
    this.#setWeights(committed.weights);
    this.#restoring = this.#restoring.then(() => this.#setSlots(committed.slots));
    return this.#restoring;
  }

  /** After a change of membership: the DistributedOptimizer forgets the old rank and size first, then the callbacks run. */
  override async reset(): Promise<void> {
    const optimizer = this.optimizer ?? this.model?.optimizer;
    if (optimizer instanceof DistributedOptimizer) optimizer.reset();
    await super.reset();
  }

  /** Makes every rank's values, weights and slots those of rank 0 (a collective). */
  override async sync(): Promise<void> {
    await this.#restoring;
    await super.sync();
    const rr = this.runtime;
    const root = rr.rank() === 0;
    const mine = root ? await this.#capture(undefined) : undefined;
    const received = (await rr.broadcastObject(mine, { root: 0, name: 'elastic/sync.tfjs' })) as Snapshot;
    if (!root) {
      this.#setWeights(received.weights);
      await this.#setSlots(received.slots);
    }
    // The first sync (elastic.run's, before any step) is what a failure before the first commit goes back to.
    this.#committed ??= received;
  }

  /** The weights and slots now, as typed arrays (those of `reuse` when they fit). */
  async #capture(reuse: Snapshot | undefined): Promise<Snapshot> {
    const weights: Saved[] = [];
    const variables = this.model?.weights ?? [];
    for (const [i, variable] of variables.entries()) {
      weights.push(await save(variable.name, variable.read(), reuse?.weights[i]));
    }
    const optimizer = this.optimizer;
    if (optimizer === undefined) return { weights, slots: undefined };
    const named = await optimizer.getWeights();
    try {
      const slots: Saved[] = [];
      for (const [i, { name, tensor }] of named.entries()) slots.push(await save(name, tensor, reuse?.slots?.[i]));
      return { weights, slots };
    } finally {
      // getWeights() makes the iteration count's scalar afresh; the slots are the optimizer's own variables.
      tf.dispose(named.map((w) => w.tensor).filter((t) => !(t instanceof tf.Variable)));
    }
  }

  #setWeights(weights: readonly Saved[]): void {
    const model = this.model;
    if (model === undefined) return;
    const variables = model.weights;
    if (variables.length !== weights.length) {
      throw new RingReduceError(`TfjsState: the model has ${variables.length} weights, the state ${weights.length}`);
    }
    weights.forEach((w, i) => {
      const shape = (variables[i] as tf.LayerVariable).shape;
      if (shape.length !== w.shape.length || shape.some((d, j) => d !== w.shape[j])) {
        throw new RingReduceError(
          `TfjsState: weight ${i} (${w.name}) has shape [${w.shape.join(', ')}] in the state, [${shape.join(', ')}] in the model`,
        );
      }
    });
    const tensors = weights.map((w) => tensorOf(w));
    try {
      model.setWeights(tensors);
    } finally {
      tf.dispose(tensors);
    }
  }

  /**
   * Gives the optimizer these slots. tfjs optimizers' setWeights() make new variables for the
   * slots and drop the old ones without disposing them: this disposes them.
   */
  async #setSlots(slots: readonly Saved[] | undefined): Promise<void> {
    const optimizer = this.optimizer;
    if (optimizer === undefined || slots === undefined) return;
    const before = await optimizer.getWeights();
    const given = slots.map((s) => ({ name: s.name, tensor: tensorOf(s) }));
    try {
      await optimizer.setWeights(given);
    } finally {
      tf.dispose(given.map((g) => g.tensor));
    }
    const after = await optimizer.getWeights();
    const kept = new Set<tf.Tensor>(after.map((w) => w.tensor).filter((t) => t instanceof tf.Variable));
    tf.dispose([...before, ...after].map((w) => w.tensor).filter((t) => !kept.has(t)));
  }
}

/** A copy of `tensor`'s values (into `reuse`'s array when it fits). */
async function save(name: string, tensor: tf.Tensor, reuse: Saved | undefined): Promise<Saved> {
  const { dtype } = tensor;
  if (dtype !== 'float32' && dtype !== 'int32' && dtype !== 'bool') {
    throw new RingReduceError(`TfjsState: ${name} is a ${dtype} tensor; float32, int32 and bool ones can be kept`);
  }
  const data = (await tensor.data()) as Values;
  const values =
    reuse !== undefined && reuse.dtype === dtype && reuse.values.length === data.length
      ? reuse.values
      : arrayOf(dtype, data.length);
  values.set(data);
  return { name, shape: [...tensor.shape], dtype, values };
}

function arrayOf(dtype: 'float32' | 'int32' | 'bool', length: number): Values {
  if (dtype === 'float32') return new Float32Array(length);
  if (dtype === 'int32') return new Int32Array(length);
  return new Uint8Array(length);
}

/** A tensor of a copy of `saved`'s values: some backends (cpu) keep the array they are given. */
function tensorOf(saved: Saved): tf.Tensor {
  return tf.tensor(saved.values.slice(), saved.shape, saved.dtype);
}

/** A TfjsState: its plain values are its properties (`state.epoch`), next to `state.model` and `state.optimizer`. */
export type TfjsState<T extends TfjsStateValues = TfjsStateValues> = TfjsStateBase<T> & T;

/**
 * @example
 * const state = new rrtf.elastic.TfjsState({ model, optimizer, epoch: 0, batch: 0 });
 * state.onReset(() => { shard = rrtf.shardRange(n, { rank: rr.rank(), size: rr.size() }); });
 * await rr.elastic.run(state, async (state) => {
 *   while (state.epoch < epochs) {
 *     await optimizer.minimizeAsync(() => lossOf(batchOf(state.epoch, state.batch, shard)));
 *     state.batch++;                                          // the step is done, counters included:
 *     if (state.batch === batches) [state.epoch, state.batch] = [state.epoch + 1, 0];
 *     if (state.batch % 4 === 0) await state.commit();        // then commit
 *   }
 * });
 */
export const TfjsState = TfjsStateBase as unknown as new <T extends TfjsStateValues>(
  values: T,
  options?: StateOptions,
) => TfjsState<T>;
