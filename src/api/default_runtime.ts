/**
 * The package's module-level functions (`rr.init()`, `rr.allreduce()`, ...), which act on one
 * default RingReduce instance, as Horovod's `hvd.*` do. This is the only module-level state in
 * the library, and it is only a facade: everything lives in the instance.
 */
import type { InitOptions } from '../core/config.js';
import { ShutdownError } from '../core/errors.js';
import type { ShapedTensor, TensorLike } from '../core/types.js';
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
  type ProcessSet,
  type RecvOptions,
  type ReduceOptions,
  type ReducescatterOptions,
  type Result,
  RingReduce,
  type ScatterOptions,
  type SendOptions,
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
  RecvOptions,
  ReduceOptions,
  ReducescatterOptions,
  Result,
  ScatterOptions,
  SendOptions,
};

let current: RingReduce | undefined;
let starting: Promise<RingReduce> | undefined;

function instance(): RingReduce {
  if (!current) throw new ShutdownError('ringreduce is not initialised: call init() first');
  return current;
}

/** Joins the job described by the environment (size 1 if none). Calling it again returns the same job. */
export async function init(options?: InitOptions): Promise<void> {
  if (current) return;
  starting ??= RingReduce.init(options);
  try {
    current = await starting;
  } finally {
    starting = undefined;
  }
}

/** The default instance, for APIs that take a runtime. */
export function runtime(): RingReduce {
  return instance();
}

export const rank = (): number => instance().rank();
export const size = (): number => instance().size();
export const localRank = (): number => instance().localRank();
export const localSize = (): number => instance().localSize();
export const crossRank = (): number => instance().crossRank();
export const crossSize = (): number => instance().crossSize();
export const isInitialized = (): boolean => current !== undefined;

export const allreduce = <T extends TensorLike>(t: T, o?: AllreduceOptions): Promise<Result<T>> => instance().allreduce(t, o);
export const allreduceSync = <T extends TensorLike>(t: T, o?: AllreduceOptions): Result<T> => instance().allreduceSync(t, o);
export const allgather = <T extends TensorLike>(t: T, o?: AllgatherOptions): Promise<Result<T>> => instance().allgather(t, o);
export const allgatherSync = <T extends TensorLike>(t: T, o?: AllgatherOptions): Result<T> => instance().allgatherSync(t, o);
export const broadcast = <T extends TensorLike>(t: T, o?: BroadcastOptions): Promise<Result<T>> => instance().broadcast(t, o);
export const broadcastSync = <T extends TensorLike>(t: T, o?: BroadcastOptions): Result<T> => instance().broadcastSync(t, o);
export const reducescatter = <T extends TensorLike>(t: T, o?: ReducescatterOptions): Promise<Result<T>> =>
  instance().reducescatter(t, o);
export const reducescatterSync = <T extends TensorLike>(t: T, o?: ReducescatterOptions): Result<T> =>
  instance().reducescatterSync(t, o);
export const alltoall = <T extends TensorLike>(t: T, o?: AlltoallOptions): Promise<AlltoallResult<T>> =>
  instance().alltoall(t, o);
export const alltoallSync = <T extends TensorLike>(t: T, o?: AlltoallOptions): AlltoallResult<T> => instance().alltoallSync(t, o);
export const reduce = <T extends TensorLike>(t: T, o?: ReduceOptions): Promise<Result<T> | null> => instance().reduce(t, o);
export const reduceSync = <T extends TensorLike>(t: T, o?: ReduceOptions): Result<T> | null => instance().reduceSync(t, o);
export const gather = <T extends TensorLike>(t: T, o?: GatherOptions): Promise<Result<T> | null> => instance().gather(t, o);
export const gatherSync = <T extends TensorLike>(t: T, o?: GatherOptions): Result<T> | null => instance().gatherSync(t, o);
export const scatter = (t: TensorLike | null, o?: ScatterOptions): Promise<ShapedTensor> => instance().scatter(t, o);
export const scatterSync = (t: TensorLike | null, o?: ScatterOptions): ShapedTensor => instance().scatterSync(t, o);
export const send = (t: TensorLike, o: SendOptions): Promise<void> => instance().send(t, o);
export const sendSync = (t: TensorLike, o: SendOptions): void => instance().sendSync(t, o);
export const recv = <T extends TensorLike>(into: T, o: RecvOptions): Promise<T> => instance().recv(into, o);
export const recvSync = <T extends TensorLike>(into: T, o: RecvOptions): T => instance().recvSync(into, o);
export const allgatherObject = <V>(v: V, o?: AllgatherObjectOptions): Promise<V[]> => instance().allgatherObject(v, o);
export const allgatherObjectSync = <V>(v: V, o?: AllgatherObjectOptions): V[] => instance().allgatherObjectSync(v, o);
export const broadcastObject = <V>(v: V, o?: BroadcastObjectOptions): Promise<V> => instance().broadcastObject(v, o);
export const broadcastObjectSync = <V>(v: V, o?: BroadcastObjectOptions): V => instance().broadcastObjectSync(v, o);
export const groupedAllreduce = <T extends TensorLike>(ts: readonly T[], o?: AllreduceOptions): Promise<Result<T>[]> =>
  instance().groupedAllreduce(ts, o);
export const groupedAllgather = <T extends TensorLike>(ts: readonly T[], o?: AllgatherOptions): Promise<Result<T>[]> =>
  instance().groupedAllgather(ts, o);
export const groupedReducescatter = <T extends TensorLike>(ts: readonly T[], o?: ReducescatterOptions): Promise<Result<T>[]> =>
  instance().groupedReducescatter(ts, o);
export const join = (o?: JoinOptions): Promise<number> => instance().join(o);
export const addProcessSet = (ranks: readonly number[]): Promise<ProcessSet> => instance().addProcessSet(ranks);
export const removeProcessSet = (set: ProcessSet): Promise<void> => instance().removeProcessSet(set);
export const processSets = (): ProcessSet[] => instance().processSets();
export const barrier = (o?: BarrierOptions): Promise<void> => instance().barrier(o);
export const barrierSync = (o?: BarrierOptions): void => instance().barrierSync(o);

/** Leaves the job (see RingReduce.shutdown); init() may be called again afterwards. */
export async function shutdown(): Promise<void> {
  const job = current;
  current = undefined;
  await job?.shutdown();
}
