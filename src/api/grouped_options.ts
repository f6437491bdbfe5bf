/** The options of the grouped calls (groupedAllreduce, groupedBroadcast, ...). */
import type { TypedArray } from '../core/types.js';

/**
 * A grouped call's options: those of its collective, for every tensor of the group (`name` names
 * the group), with `outs` in place of `out`.
 */
export type GroupedOptions<O> = Omit<O, 'out'> & {
  /**
   * Where each tensor's result goes, in the tensors' order: its collective's option 'out' for that
   * tensor (SharedArrayBuffer-backed, its dtype and length; the tensor itself runs in place, as a
   * model's gradients are allreduced where they are). An undefined entry gets fresh memory.
   */
  outs?: readonly (TypedArray | undefined)[];
};
