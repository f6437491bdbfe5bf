/**
 * Per-epoch progress on rank 0: the metrics (already averaged over ranks by
 * MetricAverageCallback, which runs before this callback), the learning rate and the job's
 * throughput (samples of all ranks per second of wall time).
 */
import * as tf from '@tensorflow/tfjs';
import { getLearningRate } from 'ringreduce/tfjs';

export class ProgressLogger extends tf.Callback {
  /** samples/s of each epoch. */
  readonly throughput: number[] = [];
  private started = 0;

  constructor(
    private readonly samplesPerEpoch: number,
    private readonly epochs: number,
    private readonly print: boolean,
  ) {
    super();
  }

  override async onEpochBegin(): Promise<void> {
    this.started = performance.now();
  }

  override async onEpochEnd(epoch: number, logs?: { [key: string]: number | tf.Scalar }): Promise<void> {
    const seconds = (performance.now() - this.started) / 1000;
    const rate = this.samplesPerEpoch / seconds;
    this.throughput.push(rate);
    if (!this.print) return;
    const metric = (key: string) => Number(logs?.[key]).toFixed(4);
    const lr = getLearningRate(this.model.optimizer).toPrecision(3);
    console.log(
      `epoch ${epoch + 1}/${this.epochs}  loss ${metric('loss')}  accuracy ${metric('acc')}  lr ${lr}  ` +
        `${seconds.toFixed(2)} s  ${Math.round(rate)} samples/s`,
    );
  }

  /** Mean throughput, leaving out the first epoch (wasm warm-up) when there are more. */
  meanThroughput(): number {
    const steady = this.throughput.length > 1 ? this.throughput.slice(1) : this.throughput;
    return steady.reduce((a, b) => a + b, 0) / steady.length;
  }
}
