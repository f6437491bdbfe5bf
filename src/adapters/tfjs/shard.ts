/**
 * Giving each rank its own part of the training data. Every rank gets the same number of
 * samples by default (see shard_math.ts for why), so all ranks run the same number of steps.
 * Rank and size default to the runtime's.
 */
import * as tf from '@tensorflow/tfjs';
import { collectivesOf, type RuntimeOption } from './runtime.js';
import { checkSpec, type ShardSpec, shardRange } from './shard_math.js';

export interface ShardOptions extends RuntimeOption {
  /** Default: the runtime's rank. */
  rank?: number;
  /** Default: the runtime's size. */
  size?: number;
  /** Give every rank the same count, dropping up to size−1 items (default true). */
  dropRemainder?: boolean;
}

function specOf(options: ShardOptions): ShardSpec {
  const needRuntime = options.rank === undefined || options.size === undefined;
  const collectives = needRuntime ? collectivesOf(options) : undefined;
  return {
    rank: options.rank ?? (collectives?.rank() as number),
    size: options.size ?? (collectives?.size() as number),
    dropRemainder: options.dropRemainder ?? true,
  };
}

/**
 * This rank's contiguous slice of `items` (an array or a typed array).
 *
 * @example
 * const mine = shardArray(allSamples); // rank r of n gets samples [r·k, (r+1)·k), k = ⌊len/n⌋
 */
export function shardArray<T extends { length: number; slice(start: number, end: number): T }>(
  items: T,
  options: ShardOptions = {},
): T {
  const { start, end } = shardRange(items.length, specOf(options));
  return items.slice(start, end);
}

/**
 * This rank's contiguous slice of `tensor` along its first dimension (a new tensor).
 *
 * @example
 * const [xs, ys] = [shardTensor(allXs), shardTensor(allYs)];
 */
export function shardTensor<R extends tf.Rank>(tensor: tf.Tensor<R>, options: ShardOptions = {}): tf.Tensor<R> {
  const rows = tensor.shape[0] ?? 0;
  const { start, end } = shardRange(rows, specOf(options));
  return tf.slice(tensor, start, end - start) as tf.Tensor<R>;
}

/**
 * This rank's elements of a tf.data.Dataset: out of every `size` consecutive elements, the
 * one at position `rank`. With dropRemainder (the default) a trailing incomplete group is
 * dropped, so every rank yields the same count. Shard before shuffling and batching, so that
 * the ranks split the same sequence.
 *
 * @example
 * const ds = shardDataset(tf.data.array(samples)).shuffle(1000).batch(64);
 */
export function shardDataset<T extends tf.TensorContainer>(
  dataset: tf.data.Dataset<T>,
  options: ShardOptions = {},
): tf.data.Dataset<T> {
  const spec = specOf(options);
  const { rank, size } = checkSpec(spec);
  const dropRemainder = spec.dropRemainder ?? true;
  return tf.data.generator(async function* () {
    const iterator = await dataset.iterator();
    for (let position = 0; ; position++) {
      const { value, done } = await iterator.next();
      if (done) return;
      const slot = position % size;
      if (slot === rank) {
        if (!dropRemainder) {
          yield value;
          continue;
        }
        // Hold this element until the group is complete, so that every rank yields it or none does.
        let complete = true;
        for (let k = slot + 1; k < size; k++, position++) {
          const next = await iterator.next();
          if (next.done) {
            complete = false;
            break;
          }
          tf.dispose(next.value);
        }
        if (!complete) {
          tf.dispose(value);
          return;
        }
        yield value;
      } else {
        tf.dispose(value);
      }
    }
  } as unknown as () => Generator<T>);
}
