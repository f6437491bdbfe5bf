/**
 * model.fit callback: reports the training's progress and metrics to `ringrun --dashboard` (the
 * page charts loss, accuracy and samples/s), and draws a progress bar on rank 0, like Keras'
 * verbose mode: on a terminal one bar redrawn in place, elsewhere (a pipe, ringrun's output) one
 * line every few seconds. The bar is cli-progress's.
 *
 * Cheap between reports: a batch that ends less than `reportEveryMs` after the last report only
 * counts its samples and moves the bar; its metrics (scalar tensors) are read only when they are
 * reported. Without a dashboard the reports go nowhere (observability/training_metrics.ts).
 */
import * as tf from '@tensorflow/tfjs';
import cliProgress from 'cli-progress';
import { publishTrainingMetrics } from '../../observability/training_metrics.js';
import { type Collectives, collectivesOf, type RuntimeOption } from './runtime.js';

/** Options of {@link DashboardCallback}: where its progress bar goes, and how often it reports. */
export interface DashboardCallbackOptions extends RuntimeOption {
  /** Draw the progress bar (default: on rank 0 only). */
  progressBar?: boolean;
  /** Where the bar goes (default: process.stdout): a writable stream, a terminal when its `isTTY` is true. */
  stream?: {
    /** Writes `chunk` (the bar's text, with terminal control sequences when `isTTY` is true). */
    write(chunk: string): unknown;
    isTTY?: boolean;
  };
  /** Batch metrics are reported (and read) at most this often; epoch ends always are. Default 500 ms. */
  reportEveryMs?: number;
  /** Away from a terminal, a progress line this often. Default 5000 ms. */
  lineEveryMs?: number;
}

type Logs = { [key: string]: number | tf.Scalar } | undefined;

/**
 * Put it after MetricAverageCallback: the epoch's line and report then show the job's averages.
 *
 * @example
 * await model.fit(xs, ys, { epochs: 5, verbose: 0, callbacks: [new MetricAverageCallback(), new DashboardCallback()] });
 */
export class DashboardCallback extends tf.Callback {
  private readonly collectives: Collectives;
  private readonly reportEveryMs: number;
  private readonly bar: cliProgress.SingleBar | undefined;
  private epochs = 0;
  private batches = 0;
  private epoch = 0;
  private lastReportAt = 0;
  private samplesSince = 0;
  private barOn = false;

  /**
   * A callback for one `model.fit` call (the bar's epoch and batch counts come from its parameters).
   * @param options where the bar goes and how often batches are reported; all optional
   */
  constructor(options: DashboardCallbackOptions = {}) {
    super();
    this.collectives = collectivesOf(options);
    this.reportEveryMs = options.reportEveryMs ?? 500;
    // A browser rank has no stdout to draw on (and its build has no cli-progress: package.json's "browser" field).
    // (Typed without Node's types, so that the package's .d.ts files need no @types/node.)
    const stream = (options.stream ?? (globalThis as { process?: { stdout?: NodeJS.WritableStream } }).process?.stdout) as
      | NodeJS.WritableStream
      | undefined;
    const draw = stream !== undefined && (options.progressBar ?? this.collectives.rank() === 0);
    if (draw) {
      this.bar = new cliProgress.SingleBar(
        {
          format: 'epoch {epoch}/{epochs} [{bar}] {value}/{total} batches {eta_formatted} left | {metrics}',
          stream,
          // Away from a terminal each drawing is a line already: no blank line after the last.
          clearOnComplete: (stream as { isTTY?: boolean }).isTTY !== true,
          noTTYOutput: true,
          notTTYSchedule: options.lineEveryMs ?? 5000,
          etaBuffer: 50,
          hideCursor: false,
          gracefulExit: false,
        },
        cliProgress.Presets.shades_classic,
      );
    }
  }

  /** Called by `model.fit` as training starts: takes the number of epochs and of batches per epoch from its parameters. */
  override async onTrainBegin(): Promise<void> {
    const params = this.params as { epochs?: number; steps?: number | null; samples?: number | null; batchSize?: number };
    this.epochs = params.epochs ?? 0;
    this.batches = params.steps ?? (params.samples && params.batchSize ? Math.ceil(params.samples / params.batchSize) : 0);
  }

  /** Called by `model.fit` as epoch `epoch` (from 0) starts: starts the epoch's bar. */
  override async onEpochBegin(epoch: number): Promise<void> {
    this.epoch = epoch;
    this.lastReportAt = performance.now();
    this.samplesSince = 0;
    if (this.bar) {
      this.bar.start(Math.max(1, this.batches), 0, { epoch: epoch + 1, epochs: this.epochs, metrics: '' });
      this.barOn = true;
    }
  }

  /**
   * Called by `model.fit` after each batch: counts its samples and moves the bar; at most every
   * `reportEveryMs`, reads the batch's metrics and reports them with the samples per second.
   */
  override async onBatchEnd(batch: number, logs?: Logs): Promise<void> {
    const size = logs?.size;
    this.samplesSince += typeof size === 'number' ? size : 0;
    const now = performance.now();
    if (now - this.lastReportAt < this.reportEveryMs) {
      this.bar?.update(batch + 1);
      return;
    }
    const values = await numbersOf(logs, ['batch', 'size']);
    this.report(batch, values, now);
    this.bar?.update(batch + 1, { metrics: formatMetrics(values) });
  }

  /** Called by `model.fit` after each epoch: reports the epoch's metrics and closes its bar with them. */
  override async onEpochEnd(epoch: number, logs?: Logs): Promise<void> {
    const values = await numbersOf(logs, []);
    this.report(-1, values, performance.now(), epoch);
    if (this.bar && this.barOn) {
      this.bar.update(Math.max(1, this.batches), { metrics: formatMetrics(values) });
      this.bar.stop();
      this.barOn = false;
    }
  }

  /** Called by `model.fit` when training ends (or stops early): stops a bar still drawn. */
  override async onTrainEnd(): Promise<void> {
    if (this.barOn) this.bar?.stop();
    this.barOn = false;
  }

  private report(batch: number, logs: Record<string, number>, now: number, epoch = this.epoch): void {
    const seconds = (now - this.lastReportAt) / 1000;
    const rate = seconds > 0 && this.samplesSince > 0 ? this.samplesSince / seconds : undefined;
    publishTrainingMetrics({
      rank: this.collectives.rank(),
      epoch,
      batch,
      ...(this.epochs > 0 && { epochs: this.epochs }),
      ...(this.batches > 0 && { batches: this.batches }),
      ...(rate !== undefined && { samplesPerSecond: rate }),
      logs,
    });
    this.lastReportAt = now;
    this.samplesSince = 0;
  }
}

/** The logs as numbers (scalar tensors read), without the keys in `skip`. */
async function numbersOf(logs: Logs, skip: readonly string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  if (!logs) return out;
  for (const [key, value] of Object.entries(logs)) {
    if (skip.includes(key)) continue;
    const number = typeof value === 'number' ? value : ((await value.data())[0] as number);
    if (Number.isFinite(number)) out[key] = number;
  }
  return out;
}

function formatMetrics(values: Record<string, number>): string {
  return Object.entries(values)
    .map(([key, value]) => `${key} ${value.toFixed(4)}`)
    .join('  ');
}
