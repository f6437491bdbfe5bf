/**
 * Broadcasting many tensors at once, and any structured-clone value. Tensors are grouped by
 * dtype and each group travels as ONE fused broadcast (at most three: float32, int32, bool), so
 * a model's hundred weights cost three collectives, not a hundred.
 */
import type * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../index.js';
import { FlatLayout } from './flat_layout.js';
import { collectivesOf, type ProcessSetOption, type RuntimeOption, type Scope, scopeOf } from './runtime.js';
import { checkTensor, read, toTensor, type WireArray } from './tensor_codec.js';

/**
 * Options of the adapter's broadcasts ({@link broadcastTensors}, {@link broadcastObject},
 * {@link broadcastVariables}, {@link broadcastOptimizerState}): the same on every rank.
 */
export interface BroadcastManyOptions extends RuntimeOption, ProcessSetOption {
  /** The rank whose values every rank receives (default 0; a rank of the process set, if one is given). */
  root?: number;
  /** Prefix of the collectives' names; the same on every rank. */
  name?: string;
}

const kGroups = [
  { dtype: 'float32', make: (n: number) => new Float32Array(n) },
  { dtype: 'int32', make: (n: number) => new Int32Array(n) },
  { dtype: 'bool', make: (n: number) => new Uint8Array(n) },
] as const;

/**
 * The root's values of `tensors` (same shapes and dtypes on every rank), as new tensors in
 * the same order. The inputs are left as they were.
 */
export async function broadcastTensors(tensors: readonly tf.Tensor[], options: BroadcastManyOptions = {}): Promise<tf.Tensor[]> {
  const collectives = collectivesOf(options);
  const scope = scopeOf(collectives, options.processSet);
  const root = rootOf(options, scope);
  const name = options.name ?? 'broadcastTensors';
  tensors.forEach((t, i) => {
    checkTensor(t, `tensors[${i}]`);
  });
  const out: tf.Tensor[] = new Array(tensors.length);
  for (const group of kGroups) {
    const indices = tensors.flatMap((t, i) => (t.dtype === group.dtype ? [i] : []));
    if (indices.length === 0) continue;
    const members = indices.map((i) => tensors[i] as tf.Tensor);
    const layout = new FlatLayout(members.map((t) => t.size));
    const parts = await Promise.all(members.map(read));
    const flat = layout.pack(parts, group.make(layout.total) as WireArray);
    const received = await collectives.broadcast(flat, { ...scope.options, root, name: `${name}.${group.dtype}` });
    layout.unpack(received as WireArray).forEach((view, k) => {
      const member = members[k] as tf.Tensor;
      out[indices[k] as number] = toTensor(view, member.shape, member.dtype);
    });
  }
  return out;
}

/**
 * The root's `value` on every rank: any structured-clone value (plain objects, arrays, strings,
 * numbers, Maps, typed arrays...); the other ranks pass a placeholder. The root gets its own
 * `value` back, the others a copy. Made of ringreduce's `broadcastObject`.
 *
 * @example
 * const config = await broadcastObject(rr.rank() === 0 ? { seed: Date.now() } : null);
 */
export async function broadcastObject<T>(value: T, options: BroadcastManyOptions = {}): Promise<T> {
  const collectives = collectivesOf(options);
  const scope = scopeOf(collectives, options.processSet);
  const root = rootOf(options, scope);
  const received = await collectives.broadcastObject(value, { ...scope.options, root, name: options.name ?? 'broadcastObject' });
  return scope.rank === root ? value : received;
}

/** Whether this rank is the broadcasts' root (in the process set, if one is given). */
export function isRootOf(options: BroadcastManyOptions): boolean {
  const scope = scopeOf(collectivesOf(options), options.processSet);
  return scope.rank === rootOf(options, scope);
}

function rootOf(options: BroadcastManyOptions, scope: Scope): number {
  const root = options.root ?? 0;
  if (!Number.isSafeInteger(root) || root < 0 || root >= scope.size) {
    const where = options.processSet === undefined ? '' : ` of process set ${options.processSet.id}`;
    throw new InvalidArgumentError(`root must be a rank${where} in [0, ${scope.size}), got ${root}`);
  }
  return root;
}
