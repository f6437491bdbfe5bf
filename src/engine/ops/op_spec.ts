/**
 * A collective, as the engine knows it: one OpSpec per operation (allreduce.ts, allgather.ts, ...)
 * says everything that differs between operations, and the codec, negotiation, response cache,
 * fusion, eager exchange and executor read it through the registry (registry.ts) instead of
 * switching on the operation themselves. Adding a collective is a new spec file and a line in
 * the registry; the compiler then checks every place that handles requests (docs/adding_a_collective.md).
 */
import type { Hierarchy } from '../../algorithms/hierarchy.js';
import type { Hubs } from '../../algorithms/hubs.js';
import type { AlgorithmOptions } from '../../algorithms/options.js';
import type { KernelSelector } from '../../algorithms/reduce.js';
import type { ForcedAlgorithms } from '../../core/algorithm_names.js';
import type { BufferPool } from '../../core/buffer_pool.js';
import type { ErrorClassName } from '../../core/errors.js';
import type { HierarchicalMode, TypedArray, WireDType } from '../../core/types.js';
import type { NativeCollectives, Transport } from '../../transport/transport.js';
import type { Reader, Writer } from '../wire/wire.js';

/** The fields of every request: what one rank asks for. */
export interface RequestBase<Op extends string = string> {
  /** The same name on every rank is the same collective. */
  name: string;
  op: Op;
  dtype: WireDType;
  /** This rank's tensor shape ([0] when the rank passes no tensor: a barrier). */
  shape: number[];
  /** A member of a grouped collective: it runs only together with the whole group (groups.ts). */
  group?: GroupTag;
  /** The caller's deadline for every rank to submit it, in ms (option 'timeoutMs'; coordinator.ts); unset: the stall timeout. */
  timeoutMs?: number;
}

/** Which group a request belongs to: its name, how many members it has, and which one this is. */
export interface GroupTag {
  name: string;
  size: number;
  index: number;
}

/** What every rank runs for a name: the agreed parameters and the numbers ranks need of each other. */
export interface Agreement<R> {
  /** The request whose parameters rule (rank 0's unless the spec says otherwise); its shape is that rank's. */
  request: R;
  /** Per-rank numbers that only negotiation knows (allgather: each rank's first dimension); [] if none. */
  counts: number[];
  /** Ranks that have joined (ops/join.ts) and take part as neutral contributors; unset: none. */
  joined?: number[];
}

/** Why ranks' requests for a name cannot run: every rank fails it with this error. */
export interface Refusal {
  errorKind: ErrorClassName;
  message: string;
}

/** One rank's submission, as the executor sees it. */
export interface OpEntry<R> {
  request: R;
  /** What the engine works on: the caller's data, copied at call time into shared memory. */
  buffer: TypedArray | undefined;
  /** The caller's option 'out', where the op's result goes when it is not `buffer` itself. */
  output?: TypedArray | undefined;
}

/** What a collective hands back to the caller beyond its buffer. */
export interface ExecutionResult {
  /** A result the executor allocated (its size was known only after negotiation). */
  output?: TypedArray;
  shape?: number[];
  /** Per-rank numbers for the caller (alltoall: how many rows came from each rank). */
  counts?: number[];
}

/** The world's collectives that change the process sets act through this, at their agreed place. */
export interface Membership {
  /** Defines set `id` with these members (job ranks, in set order). */
  define(id: number, ranks: readonly number[]): void;
  /** Removes set `id`: collectives queued in it fail; resolves once those running have finished. */
  remove(id: number): Promise<void>;
}

/** What an execution may use: one collective's tag, the transport, the algorithms' settings. */
export interface ExecutionContext {
  readonly transport: Transport;
  /** The same on every rank for this execution, different from every other one in flight. */
  readonly tag: number;
  readonly options: AlgorithmOptions;
  /** Reused memory for packing and scratch (returned once the execution settles). */
  readonly pool: BufferPool;
  readonly kernels: KernelSelector;
  /** The backend's own collectives, if it has any (MPI). */
  readonly native: NativeCollectives | undefined;
  /** Runs the communication part, timed on the timeline when there is one. */
  communicate(bytes: number, run: () => Promise<void>): Promise<void>;
  /** The world's executions only: where the collectives that change the sets act. */
  readonly membership: Membership | undefined;
  /** The set's hosts as local and cross views, when its layout allows hierarchical collectives. */
  readonly hierarchy: Hierarchy | undefined;
  /** The set's hubs and their leaves, when it mixes browser ranks with Node ranks (algorithms/hubs.ts). */
  readonly hubs: Hubs | undefined;
  /** When allreduce and allgather run hierarchically (Config); in a set with hubs, allreduce through them. */
  readonly hierarchicalAllreduce: HierarchicalMode;
  readonly hierarchicalAllgather: HierarchicalMode;
  /** Times a local step (a fusion copy) on the timeline when there is one. */
  local<T>(phase: 'FUSION_COPY', detail: Record<string, number>, run: () => T): T;
}

/**
 * Eager collectives (eager_exchange.ts): scalars, metric vectors and small gradients in jobs of
 * modest size. Each rank sends and receives (N-1)·M bytes instead of recursive doubling's
 * log2(N)·M in log2(N) more one-way latencies, a good trade while (N-1)·M stays small
 * (docs/performance.md has the measurements behind the limit).
 */
export const kEagerMaxPeerBytes = 64 * 1024;
export const kEagerMaxRanks = 8;

/** The most bytes that go eagerly in a set of `size` ranks, per tensor and per report: (size-1)·M ≤ kEagerMaxPeerBytes. */
export function eagerMaxBytes(size: number): number {
  return size < 2 || size > kEagerMaxRanks ? 0 : Math.floor(kEagerMaxPeerBytes / (size - 1));
}

/** Whether a tensor of `bytes` may go eagerly in a set of `size` ranks (an empty one never does: its place marks a withheld buffer). */
export function fitsEagerly(bytes: number, size: number): boolean {
  return bytes > 0 && bytes <= eagerMaxBytes(size);
}

/**
 * Small collectives whose data can travel with the ready round (eager_exchange.ts): every rank
 * then holds every rank's buffer when the round closes and finishes the collective locally.
 */
export interface EagerSupport<R> {
  /**
   * Whether this request travels eagerly in a job of `size` ranks with these forced algorithms
   * (the same answer on every rank: they are set alike on every rank).
   */
  fits(request: R, size: number, forced: ForcedAlgorithms | undefined): boolean;
  /**
   * Writes the result into `into` from every rank's buffer, in rank order (`into` may be one of
   * them). `firstIsScratch`: `buffers[0]` is a peer's copy that may be overwritten.
   */
  finish(request: R, buffers: readonly TypedArray[], into: TypedArray, kernels: KernelSelector, firstIsScratch: boolean): void;
}

/** How a rank that has joined takes part in a collective the others submitted (ops/join.ts). */
export interface JoinSupport<R> {
  /** The agreement once `joined` ranks take part as neutral contributors, or why they cannot. */
  adjust(name: string, agreement: Agreement<R>, joined: readonly number[]): Agreement<R> | Refusal;
  /** A joined rank's stand-in for its missing submission: neutral data of the agreed shape. */
  standIn(agreement: Agreement<R>): OpEntry<R>;
}

export interface OpSpec<R extends RequestBase> {
  readonly op: R['op'];
  /** The fields beyond RequestBase, on the wire (wire.ts). */
  write(w: Writer, request: R): void;
  read(r: Reader, base: RequestBase<R['op']>): R;
  /** Every rank's request for `name` (indexed by rank, all of this op): what they agree on, or why not. */
  agree(name: string, requests: readonly R[]): Agreement<R> | Refusal;
  /**
   * Whether ranks may run it from the response cache, by id (ready rounds). Only when the
   * agreement depends on nothing but the request's own fields: no per-rank counts.
   */
  readonly cacheable: boolean;
  /** Consecutive responses whose requests have the same key run as one, over one packed buffer (fusion.ts). */
  fusionKey?(request: R): string;
  readonly eager?: EagerSupport<R>;
  /** Whether ranks that have joined can take part, and how; unset: the collective fails while any has. */
  readonly joined?: JoinSupport<R>;
  /**
   * Runs the agreed collective for `entries` (one per name, in the response's order): the result
   * of each entry at its index, where missing entries (a shorter list) hand back nothing.
   */
  execute(ctx: ExecutionContext, agreement: Agreement<R>, entries: readonly OpEntry<R>[]): Promise<readonly ExecutionResult[]>;
}

export function isRefusal<R>(verdict: Agreement<R> | Refusal): verdict is Refusal {
  return 'errorKind' in verdict;
}
