/**
 * Training metrics on their way to ringrun's dashboard. The TF.js callback (on the caller's
 * thread) publishes them on a BroadcastChannel of this process; the engine thread's dashboard
 * reporter, if there is one, keeps the latest of its rank and sends it with its next report.
 * Nothing listens when no dashboard is watching, and a post costs a structured clone of a few
 * numbers, so the callback needs to know nothing of the dashboard. Imports nothing of ours, nor of Node's: a browser rank loads it too (and nothing listens there).
 */
export const kTrainingChannel = 'ringreduce:training-metrics';

/** What a training loop reports: the last batch's or epoch's metrics and where it is. */
export interface TrainingMetrics {
  /** The job rank that reports. */
  rank: number;
  /** 0-based epoch, and batch within it (-1 at an epoch's end). */
  epoch: number;
  batch: number;
  /** Epochs and batches per epoch, when known. */
  epochs?: number;
  batches?: number;
  /** Samples per second of this rank over the last report interval. */
  samplesPerSecond?: number;
  /** loss, acc, val_loss, ...: the numbers model.fit logs. */
  logs: Record<string, number>;
}

let channel: BroadcastChannel | undefined;

/** Publishes `metrics` to this process's dashboard reporter, if any. Never throws, never blocks. */
export function publishTrainingMetrics(metrics: TrainingMetrics): void {
  try {
    if (!channel) {
      // The global one: Node's (that of node:worker_threads) or a browser's.
      channel = new BroadcastChannel(kTrainingChannel);
      (channel as { unref?(): void }).unref?.();
    }
    channel.postMessage(metrics);
  } catch {
    // A metric that cannot be cloned or a closed channel: the page misses one point.
  }
}
