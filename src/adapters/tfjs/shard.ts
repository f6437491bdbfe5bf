/**
 * Giving each rank its own part of the training data. Every rank gets the same number of
 * samples by default (see shard_math.ts for why), so all ranks run the same number of steps.
 * With `dropRemainder: false` nothing is dropped: the first (n % size) ranks get one sample
 * more, so they run up to one step more per epoch, which JoinCallback (or rr.join() in a custom
 * loop) absorbs. Rank and size default to the runtime's, or the process set's when one is given.
 */
import * as tf from '@tensorflow/tfjs';
import { collectivesOf, type ProcessSetOption, type RuntimeOption, scopeOf } from './runtime.js';
import { checkSpec, type ShardSpec, shardRange } from './shard_math.js';

/**
 * Options of {@link shardArray}, {@link shardTensor} and {@link shardDataset}: which part this rank
 * takes (by default, its rank's of the job's size, or of the process set's), and what happens to
 * the items that do not divide evenly.
 */
export interface ShardOptions extends RuntimeOption, ProcessSetOption {
  /** Default: the runtime's rank (this rank's rank in the process set, if one is given). */
  rank?: number;
  /** Default: the runtime's size (the process set's size, if one is given). */
  size?: number;
  /**
   * true (default): every rank gets ⌊n / size⌋ items and up to size − 1 are dropped. false: every
   * item is used, and the first (n % size) ranks get one item more than the others.
   */
  dropRemainder?: boolean;
}

function specOf(options: ShardOptions): ShardSpec {
  const needRuntime = options.rank === undefined || options.size === undefined;
  const scope = needRuntime ? scopeOf(collectivesOf(options), options.processSet) : undefined;
  return {
    rank: options.rank ?? (scope?.rank as number),
    size: options.size ?? (scope?.size as number),
    dropRemainder: options.dropRemainder ?? true,
  };
}

/**
 * This rank's contiguous slice of `items` (an array or a typed array).
 *
 * @example
 * const mine = shardArray(allSamples); // rank r of n gets samples [r·k, (r+1)·k), k = ⌊len/n⌋
 * const all = shardArray(allSamples, { dropRemainder: false }); // 10 samples on 3 ranks: 4, 3, 3
 */
export function shardArray<
  T extends {
    length: number;
    /** The items from `start` to `end` (exclusive), as arrays and typed arrays slice. */
    slice(start: number, end: number): T;
  },
>(items: T, options: ShardOptions = {}): T {
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
 * dropped, so every rank yields the same count; without, its elements go to the first ranks.
 * Shard before shuffling and batching, so that the ranks split the same sequence.
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
