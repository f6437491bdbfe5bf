/**
 * model.fit callback: at the start of training, every rank takes the root's weights and
 * optimizer state, so all ranks start identical (their random initialisations differ).
 */
import * as tf from '@tensorflow/tfjs';
import { type BroadcastModelOptions, broadcastModel } from './broadcast_model.js';

/**
 * @example
 * await model.fit(xs, ys, { callbacks: [new BroadcastGlobalVariablesCallback({ root: 0 })] });
 */
export class BroadcastGlobalVariablesCallback extends tf.Callback {
  private done = false;

  constructor(private readonly options: BroadcastModelOptions = {}) {
    super();
  }

  /** Broadcasts once per callback instance: a second fit() continues from identical weights. */
  override async onTrainBegin(): Promise<void> {
    if (this.done) return;
    await broadcastModel(this.model, { ...this.options, name: this.options.name ?? 'BroadcastGlobalVariablesCallback' });
    this.done = true;
  }
}
