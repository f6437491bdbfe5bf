/**
 * The package's module-level functions (`rr.init()`, `rr.allreduce()`, ...), which act on one
 * default RingReduce instance, as Horovod's `hvd.*` do. This is the only module-level state in
 * the library, and it is only a facade: everything lives in the instance.
 */
import type { InitOptions } from '../core/config.js';
import { InvalidArgumentError, ShutdownError } from '../core/errors.js';
import type { ShapedTensor, TensorLike } from '../core/types.js';
import { kVersion } from '../core/version.js';
import {
  type AllgatherObjectOptions,
  type AllgatherOptions,
  type AllreduceOptions,
  type AlltoallOptions,
  type AlltoallResult,
  type BarrierOptions,
  type BroadcastObjectOptions,
  type BroadcastOptions,
  type GatherOptions,
  type JoinOptions,
  type OpStats,
  type ProcessSet,
  type RankStats,
  type RecvOptions,
  type ReduceOptions,
  type ReducescatterOptions,
  type Result,
  RingReduce,
  type ScatterOptions,
  type SendOptions,
  type StatOp,
} from './runtime.js';

export type {
  AllgatherObjectOptions,
  AllgatherOptions,
  AllreduceOptions,
  AlltoallOptions,
  AlltoallResult,
  BarrierOptions,
  BroadcastObjectOptions,
  BroadcastOptions,
  GatherOptions,
  JoinOptions,
  OpStats,
  RankStats,
  RecvOptions,
  ReduceOptions,
  ReducescatterOptions,
  Result,
  ScatterOptions,
  SendOptions,
  StatOp,
};

let current: RingReduce | undefined;
let starting: Promise<RingReduce> | undefined;
/** The options of the init() call that started (or is starting) the default instance. */
let startedWith: InitOptions = {};

/** Whether a default instance was shut down (for the message of a call made after that). */
let wasShutDown = false;

function instance(): RingReduce {
  if (current) return current;
  if (starting) {
    throw new ShutdownError(
      'init() has not finished: await rr.init() before calling ringreduce (it resolves once every rank has joined)',
    );
  }
  if (wasShutDown) throw new ShutdownError('ringreduce was shut down: call init() again to join a job');
  throw new ShutdownError('ringreduce is not initialised: call init() first');
}

/** Runs `call` on the default instance; before init() (or after shutdown()) it rejects rather than throws. */
function withInstance<R>(call: (job: RingReduce) => Promise<R>): Promise<R> {
  try {
    return call(instance());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The first option given now that differs from the first init() call's, with both values. */
function differingOption(now: InitOptions): string | undefined {
  for (const [name, value] of Object.entries(now)) {
    if (value === undefined) continue;
    const then = (startedWith as Record<string, unknown>)[name];
    if (JSON.stringify(value) !== JSON.stringify(then)) {
      return `init option '${name}' is ${JSON.stringify(value)}, but the job was joined with ${then === undefined ? 'it unset' : JSON.stringify(then)}: call shutdown() first to join with other options`;
    }
  }
  return undefined;
}

/**
 * Joins the job described by the environment (size 1 if none); `options` win over it
 * (docs/env.md). Calling it again returns the same job: with no options, or with options that
 * agree with the first call's; an option that differs rejects with InvalidArgumentError naming it.
 * @example await rr.init(); console.log(`rank ${rr.rank()} of ${rr.size()}`);
 */
export async function init(options: InitOptions = {}): Promise<void> {
  if (current !== undefined || starting !== undefined) {
    const differs = differingOption(options);
    if (differs !== undefined) throw new InvalidArgumentError(differs);
  } else {
    startedWith = { ...options };
  }
  if (current) return;
  starting ??= RingReduce.init(options);
  try {
    current = await starting;
  } finally {
    starting = undefined;
  }
}

/** The default instance, for APIs that take a runtime. Throws ShutdownError before init(). */
export function runtime(): RingReduce {
  return instance();
}

export { programArgs } from './runtime.js';

/** This package's version, e.g. '0.1.0'. */
export const version: string = kVersion;

/** This rank, 0 … size()-1. Throws ShutdownError before init(). */
export const rank = (): number => instance().rank();
/** The number of ranks in the job. */
export const size = (): number => instance().size();
/** This rank among the ranks on this host. */
export const localRank = (): number => instance().localRank();
/** The number of ranks on this host. */
export const localSize = (): number => instance().localSize();
/** The index of this host among the job's hosts. */
export const crossRank = (): number => instance().crossRank();
/** The number of hosts in the job. */
export const crossSize = (): number => instance().crossSize();
/** Whether init() has completed (and shutdown() has not been called since). */
export const isInitialized = (): boolean => current !== undefined;
/** The backend this rank connected with: 'tcp', 'mpi' or 'solo' (a job of one rank); see {@link RingReduce.backend}. */
export const backend = (): ReturnType<RingReduce['backend']> => instance().backend();
/** This rank's counters since init, read without a round trip to the engine: {@link RingReduce.stats}. */
export const stats = (): RankStats => instance().stats();

/** Element-wise reduction across ranks, every rank gets the result: {@link RingReduce.allreduce}. */
export const allreduce = <T extends TensorLike>(t: T, o?: AllreduceOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.allreduce(t, o));
/** {@link allreduce}, blocking this thread until done: {@link RingReduce.allreduceSync}. */
export const allreduceSync = <T extends TensorLike>(t: T, o?: AllreduceOptions): Result<T> => instance().allreduceSync(t, o);
/** Every rank's tensor concatenated along the first dimension: {@link RingReduce.allgather}. */
export const allgather = <T extends TensorLike>(t: T, o?: AllgatherOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.allgather(t, o));
/** {@link allgather}, blocking this thread until done. */
export const allgatherSync = <T extends TensorLike>(t: T, o?: AllgatherOptions): Result<T> => instance().allgatherSync(t, o);
/** The root's tensor on every rank: {@link RingReduce.broadcast}. */
export const broadcast = <T extends TensorLike>(t: T, o?: BroadcastOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.broadcast(t, o));
/** {@link broadcast}, blocking this thread until done. */
export const broadcastSync = <T extends TensorLike>(t: T, o?: BroadcastOptions): Result<T> => instance().broadcastSync(t, o);
/** The reduction across ranks, split along the first dimension: {@link RingReduce.reducescatter}. */
export const reducescatter = <T extends TensorLike>(t: T, o?: ReducescatterOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.reducescatter(t, o));
/** {@link reducescatter}, blocking this thread until done. */
export const reducescatterSync = <T extends TensorLike>(t: T, o?: ReducescatterOptions): Result<T> =>
  instance().reducescatterSync(t, o);
/** Rows sent to and received from every rank: {@link RingReduce.alltoall}. */
export const alltoall = <T extends TensorLike>(t: T, o?: AlltoallOptions): Promise<AlltoallResult<T>> =>
  withInstance((rr) => rr.alltoall(t, o));
/** {@link alltoall}, blocking this thread until done. */
export const alltoallSync = <T extends TensorLike>(t: T, o?: AlltoallOptions): AlltoallResult<T> => instance().alltoallSync(t, o);
/** The reduction across ranks, on the root only (null elsewhere): {@link RingReduce.reduce}. */
export const reduce = <T extends TensorLike>(t: T, o?: ReduceOptions): Promise<Result<T> | null> =>
  withInstance((rr) => rr.reduce(t, o));
/** {@link reduce}, blocking this thread until done. */
export const reduceSync = <T extends TensorLike>(t: T, o?: ReduceOptions): Result<T> | null => instance().reduceSync(t, o);
/** Every rank's tensor concatenated, on the root only (null elsewhere): {@link RingReduce.gather}. */
export const gather = <T extends TensorLike>(t: T, o?: GatherOptions): Promise<Result<T> | null> =>
  withInstance((rr) => rr.gather(t, o));
/** {@link gather}, blocking this thread until done. */
export const gatherSync = <T extends TensorLike>(t: T, o?: GatherOptions): Result<T> | null => instance().gatherSync(t, o);
/** The root's tensor split along the first dimension, one piece per rank: {@link RingReduce.scatter}. */
export const scatter = (t: TensorLike | null, o?: ScatterOptions): Promise<ShapedTensor> =>
  withInstance((rr) => rr.scatter(t, o));
/** {@link scatter}, blocking this thread until done. */
export const scatterSync = (t: TensorLike | null, o?: ScatterOptions): ShapedTensor => instance().scatterSync(t, o);
/** Sends a tensor to one rank, which receives it with recv: {@link RingReduce.send}. */
export const send = (t: TensorLike, o: SendOptions): Promise<void> => withInstance((rr) => rr.send(t, o));
/** {@link send}, blocking this thread until done. */
export const sendSync = (t: TensorLike, o: SendOptions): void => instance().sendSync(t, o);
/** Receives what one rank sends this rank into `into`: {@link RingReduce.recv}. */
export const recv = <T extends TensorLike>(into: T, o: RecvOptions): Promise<T> => withInstance((rr) => rr.recv(into, o));
/** {@link recv}, blocking this thread until done. */
export const recvSync = <T extends TensorLike>(into: T, o: RecvOptions): T => instance().recvSync(into, o);
/** Every rank's value (any structured-clone value), in rank order: {@link RingReduce.allgatherObject}. */
export const allgatherObject = <V>(v: V, o?: AllgatherObjectOptions): Promise<V[]> =>
  withInstance((rr) => rr.allgatherObject(v, o));
/** {@link allgatherObject}, blocking this thread until done. */
export const allgatherObjectSync = <V>(v: V, o?: AllgatherObjectOptions): V[] => instance().allgatherObjectSync(v, o);
/** The root's value (any structured-clone value) on every rank: {@link RingReduce.broadcastObject}. */
export const broadcastObject = <V>(v: V, o?: BroadcastObjectOptions): Promise<V> =>
  withInstance((rr) => rr.broadcastObject(v, o));
/** {@link broadcastObject}, blocking this thread until done. */
export const broadcastObjectSync = <V>(v: V, o?: BroadcastObjectOptions): V => instance().broadcastObjectSync(v, o);
/** Allreduces several tensors as one unit, fused: {@link RingReduce.groupedAllreduce}. */
export const groupedAllreduce = <T extends TensorLike>(ts: readonly T[], o?: AllreduceOptions): Promise<Result<T>[]> =>
  withInstance((rr) => rr.groupedAllreduce(ts, o));
/** Allgathers several tensors as one unit: {@link RingReduce.groupedAllgather}. */
export const groupedAllgather = <T extends TensorLike>(ts: readonly T[], o?: AllgatherOptions): Promise<Result<T>[]> =>
  withInstance((rr) => rr.groupedAllgather(ts, o));
/** Reducescatters several tensors as one unit: {@link RingReduce.groupedReducescatter}. */
export const groupedReducescatter = <T extends TensorLike>(ts: readonly T[], o?: ReducescatterOptions): Promise<Result<T>[]> =>
  withInstance((rr) => rr.groupedReducescatter(ts, o));
/** This rank has no more data; resolves to the last rank to join: {@link RingReduce.join}. */
export const join = (o?: JoinOptions): Promise<number> => withInstance((rr) => rr.join(o));
/** Adds a process set (a collective of the whole job): {@link RingReduce.addProcessSet}. */
export const addProcessSet = (ranks: readonly number[]): Promise<ProcessSet> => withInstance((rr) => rr.addProcessSet(ranks));
/** Removes a process set (a collective of the whole job): {@link RingReduce.removeProcessSet}. */
export const removeProcessSet = (set: ProcessSet): Promise<void> => withInstance((rr) => rr.removeProcessSet(set));
/** The process sets defined and not removed, in the order they were added. */
export const processSets = (): ProcessSet[] => instance().processSets();
/** Resolves once every rank has called barrier: {@link RingReduce.barrier}. */
export const barrier = (o?: BarrierOptions): Promise<void> => withInstance((rr) => rr.barrier(o));
/** {@link barrier}, blocking this thread until done. */
export const barrierSync = (o?: BarrierOptions): void => instance().barrierSync(o);

/** Leaves the job (see RingReduce.shutdown); init() may be called again afterwards. */
export async function shutdown(): Promise<void> {
  const job = current;
  current = undefined;
  if (job) wasShutDown = true;
  await job?.shutdown();
}
