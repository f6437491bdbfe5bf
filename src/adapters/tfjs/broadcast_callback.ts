/**
 * model.fit callback: at the start of training, every rank takes the root's weights and
 * optimizer state, so all ranks start identical (their random initialisations differ).
 */
import * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../core/errors.js';
import { type BroadcastModelOptions, broadcastModel } from './broadcast_model.js';

/**
 * @example
 * await model.fit(xs, ys, { callbacks: [new BroadcastGlobalVariablesCallback({ root: 0 })] });
 * // or, as Horovod's BroadcastGlobalVariablesCallback(root_rank): new BroadcastGlobalVariablesCallback(0)
 */
export class BroadcastGlobalVariablesCallback extends tf.Callback {
  private done = false;
  private readonly options: BroadcastModelOptions;

  /** `rootOrOptions`: the root's rank, or the options of broadcastModel (`{ root, processSet, ... }`). */
  constructor(rootOrOptions: number | BroadcastModelOptions = {}) {
    super();
    if (typeof rootOrOptions === 'number') {
      if (!Number.isSafeInteger(rootOrOptions) || rootOrOptions < 0) {
        throw new InvalidArgumentError(
          `BroadcastGlobalVariablesCallback: the root must be a rank (an integer >= 0), got ${rootOrOptions}`,
        );
      }
      this.options = { root: rootOrOptions };
    } else if (typeof rootOrOptions === 'object' && rootOrOptions !== null && !Array.isArray(rootOrOptions)) {
      this.options = rootOrOptions;
    } else {
      throw new InvalidArgumentError(
        `BroadcastGlobalVariablesCallback takes a root rank or an options object ({ root, processSet }), got ${String(rootOrOptions)}`,
      );
    }
  }

  /** Broadcasts once per callback instance: a second fit() continues from identical weights. */
  override async onTrainBegin(): Promise<void> {
    if (this.done) return;
    await broadcastModel(this.model, { ...this.options, name: this.options.name ?? 'BroadcastGlobalVariablesCallback' });
    this.done = true;
  }
}
