/**
 * The registry of collectives: every OpSpec, in wire order. The request union, the operation
 * names and their wire codes all derive from this one list, so a new collective is one spec file
 * and one entry here (docs/adding_a_collective.md).
 */
import type { CollectiveOp } from '../../core/collective_ops.js';
import { type AllgatherRequest, allgatherOp } from './allgather.js';
import { type AllreduceRequest, allreduceOp } from './allreduce.js';
import { type AlltoallRequest, alltoallOp } from './alltoall.js';
import { type BarrierRequest, barrierOp } from './barrier.js';
import { type BroadcastRequest, broadcastOp } from './broadcast.js';
import { type GatherRequest, gatherOp } from './gather.js';
import { type JoinRequest, joinOp } from './join.js';
import type { OpSpec } from './op_spec.js';
import { type AddProcessSetRequest, addProcessSetOp, type RemoveProcessSetRequest, removeProcessSetOp } from './process_set.js';
import { type ReduceRequest, reduceOp } from './reduce.js';
import { type ReducescatterRequest, reducescatterOp } from './reducescatter.js';
import { type ScatterRequest, scatterOp } from './scatter.js';

/** In the order of core/collective_ops.ts (a unit test pins it): a spec's index is its operation's wire code. */
const kSpecs = [
  allreduceOp,
  allgatherOp,
  broadcastOp,
  barrierOp,
  reducescatterOp,
  alltoallOp,
  reduceOp,
  gatherOp,
  scatterOp,
  addProcessSetOp,
  removeProcessSetOp,
  joinOp,
] as const;

type RequestOf<S> = S extends OpSpec<infer R> ? R : never;

/** What one rank asks for: a union with one member per collective, told apart by `op`. */
export type Request = RequestOf<(typeof kSpecs)[number]>;

/** Compile-time: every named collective has a spec here, and every spec a name there. */
const kOneSpecPerOp: [Request['op']] extends [CollectiveOp] ? ([CollectiveOp] extends [Request['op']] ? true : never) : never =
  true;
void kOneSpecPerOp;

export type {
  AddProcessSetRequest,
  AllgatherRequest,
  AllreduceRequest,
  AlltoallRequest,
  BarrierRequest,
  BroadcastRequest,
  GatherRequest,
  JoinRequest,
  ReduceRequest,
  ReducescatterRequest,
  RemoveProcessSetRequest,
  ScatterRequest,
};

/** The operations of the specs, in their order (a test checks it is core/collective_ops.ts'). */
export const kSpecOps: readonly Request['op'][] = kSpecs.map((spec) => spec.op);

const kByOp = new Map<string, OpSpec<Request>>(kSpecs.map((spec) => [spec.op, spec as unknown as OpSpec<Request>]));

/** The spec of `request`'s operation, typed for it. */
export function specOf<R extends Request>(request: R): OpSpec<R> {
  return kByOp.get(request.op) as unknown as OpSpec<R>;
}

/** fusionKeyOf's answers by request: a training loop's cached requests are the same objects every step. */
const kFusionKeys = new WeakMap<Request, string | null>();

/**
 * The key under which `request` may be fused with others (its op and its spec's fusion key), or
 * undefined when its operation does not fuse. Computed once per request object.
 */
export function fusionKeyOf(request: Request): string | undefined {
  let key = kFusionKeys.get(request);
  if (key === undefined) {
    const own = specOf(request).fusionKey?.(request);
    key = own === undefined ? null : `${request.op}/${own}`;
    kFusionKeys.set(request, key);
  }
  return key ?? undefined;
}
