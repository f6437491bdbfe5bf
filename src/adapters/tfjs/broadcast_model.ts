/**
 * Making every rank start from the root's state: variables, a model's weights and its
 * optimizer's state (moments, iteration count). Data-parallel training needs identical
 * starting points; random initialisation differs per process, so broadcast before step one.
 */
import * as tf from '@tensorflow/tfjs';
import { type BroadcastManyOptions, broadcastObject, broadcastTensors, isRootOf } from './broadcast_tensors.js';
import type { NamedTensor } from './gradient_bundle.js';

/**
 * Assigns the root's values to `variables` on every rank (same shapes and order everywhere).
 *
 * @example
 * const w = tf.variable(tf.randomNormal([784, 10]));
 * await broadcastVariables([w], { root: 0 });
 */
export async function broadcastVariables(variables: readonly tf.Variable[], options: BroadcastManyOptions = {}): Promise<void> {
  const received = await broadcastTensors(variables, { ...options, name: options.name ?? 'broadcastVariables' });
  const isRoot = isRootOf(options);
  variables.forEach((v, i) => {
    if (!isRoot) v.assign(received[i] as tf.Tensor);
  });
  tf.dispose(received);
}

/** Options of {@link broadcastModel}: those of every broadcast, and whether the optimizer's state goes too. */
export interface BroadcastModelOptions extends BroadcastManyOptions {
  /** Also broadcast the optimizer's state when the model is compiled (default true). */
  includeOptimizer?: boolean;
}

/**
 * Sets every rank's model weights (trainable or not) and, by default, its optimizer state to
 * the root's.
 *
 * @example
 * await broadcastModel(model); // before training, or after the root loaded a checkpoint
 */
export async function broadcastModel(model: tf.LayersModel, options: BroadcastModelOptions = {}): Promise<void> {
  const name = options.name ?? 'broadcastModel';
  const isRoot = isRootOf(options);
  const weights = await broadcastTensors(model.getWeights(), { ...options, name: `${name}.weights` });
  if (!isRoot) model.setWeights(weights);
  tf.dispose(weights);
  const optimizer = (model as { optimizer?: tf.Optimizer }).optimizer;
  if ((options.includeOptimizer ?? true) && optimizer) {
    await broadcastOptimizerState(optimizer, { ...options, name: `${name}.optimizer` });
  }
}

interface SlotManifest {
  name: string;
  shape: number[];
  dtype: tf.DataType;
}

/**
 * Sets every rank's optimizer state to the root's. The root's slots may not exist elsewhere
 * yet (tfjs creates them at the first step, and a root restored from a checkpoint has them
 * before anyone else), so the root first broadcasts their names, shapes and dtypes.
 */
export async function broadcastOptimizerState(optimizer: tf.Optimizer, options: BroadcastManyOptions = {}): Promise<void> {
  const name = options.name ?? 'broadcastOptimizerState';
  const isRoot = isRootOf(options);
  const own: NamedTensor[] = isRoot ? await optimizer.getWeights() : [];
  const manifest = await broadcastObject<SlotManifest[]>(
    own.map(({ name: slot, tensor }) => ({ name: slot, shape: tensor.shape, dtype: tensor.dtype })),
    { ...options, name: `${name}.manifest` },
  );
  const placeholders = isRoot ? own.map((w) => w.tensor) : manifest.map((m) => tf.zeros(m.shape, m.dtype));
  const values = await broadcastTensors(placeholders, { ...options, name: `${name}.values` });
  if (!isRoot) {
    await optimizer.setWeights(manifest.map((m, i) => ({ name: m.name, tensor: values[i] as tf.Tensor })));
    tf.dispose(placeholders);
  }
  tf.dispose(values);
}
