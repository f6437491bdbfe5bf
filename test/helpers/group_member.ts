/**
 * Reaching under the facade of a real rank (memory or TCP world) for the tests of grouped
 * collectives: a single member of a group submitted on its own (the facade only ever submits a
 * whole group at once, so a group with a member missing on one rank needs this), and a memory
 * rank's engine (its execution counts).
 */
import { kJsHalfConverter } from '../../src/algorithms/half_convert.js';
import type { CallContext } from '../../src/api/call.js';
import type { EngineLink } from '../../src/api/engine_client.js';
import { prepareAllreduce } from '../../src/api/ops/allreduce.js';
import type { ProcessSet, RingReduce } from '../../src/api/runtime.js';
import { BufferPool } from '../../src/core/buffer_pool.js';
import { allocShared } from '../../src/core/dtypes.js';
import type { ReduceOp, TensorLike, TypedArray } from '../../src/core/types.js';
import type { Engine } from '../../src/engine/engine.js';
import type { Request } from '../../src/engine/wire/messages.js';
import { LocalEngine } from './local_engine.js';

/** The engine link behind a RingReduce (a private field of the facade). */
export function engineLinkOf(rr: RingReduce): EngineLink {
  return (rr as unknown as { engine: EngineLink }).engine;
}

/** The Engine of a rank of a memory world (test/helpers/local_engine.ts). */
export function memoryEngineOf(rr: RingReduce): Engine {
  const link = engineLinkOf(rr);
  if (!(link instanceof LocalEngine)) throw new Error('not a rank of a memory world');
  return link.engine;
}

export interface GroupMember {
  /** The group's name: the facade names member i `${group}/${i}`. */
  group: string;
  size: number;
  index: number;
  op?: ReduceOp;
  processSet?: ProcessSet;
}

/**
 * Submits member `index` of the grouped allreduce `group` of `size` members, alone, exactly as
 * groupedAllreduce(tensors, { name: group }) submits each of its members; resolves to the result.
 */
export async function allreduceGroupMember(rr: RingReduce, tensor: TensorLike, member: GroupMember): Promise<TypedArray> {
  const set = member.processSet;
  const context: CallContext = {
    rank: set ? set.rank() : rr.rank(),
    size: set ? set.size() : rr.size(),
    nameFor: (_op, name) => name as string,
    fresh: (t, length = t.data.length) => allocShared(t.dtype, length),
    staging: new BufferPool<SharedArrayBuffer>(0, (bytes) => new SharedArrayBuffer(bytes)),
    halves: () => kJsHalfConverter,
  };
  const prepared = prepareAllreduce(context, tensor, { name: `${member.group}/${member.index}`, op: member.op ?? 'sum' });
  (prepared.request as Request).group = { name: member.group, size: member.size, index: member.index };
  if (set) prepared.set = set.id;
  const completion = await engineLinkOf(rr).submit(prepared);
  const result = prepared.finish(completion) as TensorLike;
  return ArrayBuffer.isView(result) ? (result as TypedArray) : result.data;
}
