/**
 * The registry of collectives: every OpSpec, in wire order. The request union, the operation
 * names and their wire codes all derive from this one list, so a new collective is one spec file
 * and one entry here (docs/adding_a_collective.md).
 */
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

/** A spec's index is its operation's code in negotiation messages: append only. */
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
export type CollectiveOp = Request['op'];

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

/** The operations in wire order. */
export const kCollectiveOps: readonly CollectiveOp[] = kSpecs.map((spec) => spec.op);

const kByOp = new Map<string, OpSpec<Request>>(kSpecs.map((spec) => [spec.op, spec as unknown as OpSpec<Request>]));

/** The spec of `request`'s operation, typed for it. */
export function specOf<R extends Request>(request: R): OpSpec<R> {
  return kByOp.get(request.op) as unknown as OpSpec<R>;
}

/** The name of the n-th unnamed call of `op` on a rank: ranks match unnamed calls by their order per op. */
export function unnamedName(op: CollectiveOp, n: number): string {
  return `${op}#${n}`;
}

const kUnnamed = new RegExp(`^(${kCollectiveOps.join('|')})#\\d+$`);

/** Whether `name` is one that unnamedName made: each is used once, so it is never worth caching. */
export function isUnnamed(name: string): boolean {
  return kUnnamed.test(name);
}
