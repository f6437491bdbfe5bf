/**
 * model.fit callback: at the end of each epoch, replaces every metric in the epoch's logs
 * (loss, accuracy, val_* ...) by its average over the ranks (of the process set, with one), so that what rank 0 prints, what
 * History records and what later callbacks (early stopping, checkpoints) see describe the
 * whole job rather than one shard. All metrics travel in one allreduce.
 */
import * as tf from '@tensorflow/tfjs';
import { type Collectives, collectivesOf, type ProcessSetOption, type RuntimeOption, scopeOf } from './runtime.js';

/** Options of {@link MetricAverageCallback}. */
export interface MetricAverageOptions extends RuntimeOption, ProcessSetOption {
  /** Name of the collective (default 'MetricAverageCallback'). */
  name?: string;
}

/**
 * Put it before callbacks that read the metrics (they run in list order).
 *
 * @example
 * callbacks: [new BroadcastGlobalVariablesCallback(), new MetricAverageCallback(), logger]
 */
export class MetricAverageCallback extends tf.Callback {
  private readonly collectives: Collectives;
  private readonly name: string;
  private readonly processSet: ProcessSetOption['processSet'];

  /**
   * A callback to pass to `model.fit` on every rank of the job (or of the process set).
   * @param options the runtime, the process set to average over (default: the whole job), the collective's name
   * @throws InvalidArgumentError if `processSet` is not a ProcessSet holding this rank
   */
  constructor(options: MetricAverageOptions = {}) {
    super();
    this.collectives = collectivesOf(options);
    this.name = options.name ?? 'MetricAverageCallback';
    this.processSet = options.processSet;
    if (this.processSet !== undefined) scopeOf(this.collectives, this.processSet);
  }

  /**
   * Called by `model.fit` after each epoch: replaces each value of `logs` by its average over the
   * ranks, in one allreduce (float64). Every rank must log the same metrics.
   */
  override async onEpochEnd(_epoch: number, logs?: { [key: string]: number | tf.Scalar }): Promise<void> {
    if (!logs) return;
    await averageLogs(logs, this.collectives, this.name, this.processSet);
  }
}

/** Replaces, in place, each value of `logs` (numbers or scalar tensors) by its average over ranks (of `processSet`). */
export async function averageLogs(
  logs: { [key: string]: number | tf.Scalar },
  collectives: Collectives,
  name: string,
  processSet?: ProcessSetOption['processSet'],
): Promise<void> {
  // Sorted so that every rank packs the same metric at the same offset.
  const keys = Object.keys(logs).sort();
  if (keys.length === 0) return;
  const values = new Float64Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const value = logs[keys[i] as string];
    values[i] = typeof value === 'number' ? value : ((await (value as tf.Scalar).data())[0] as number);
  }
  const scope = processSet === undefined ? {} : { processSet };
  const averaged = (await collectives.allreduce(values, { ...scope, name, op: 'average' })) as Float64Array;
  keys.forEach((key, i) => {
    const old = logs[key];
    logs[key] = averaged[i] as number;
    if (typeof old !== 'number') old?.dispose();
  });
}
