/**
 * The package's module-level functions (`rr.init()`, `rr.allreduce()`, ...), which act on one
 * default RingReduce instance, as Horovod's `hvd.*` do. This is the only module-level state in
 * the library, and it is only a facade: everything lives in the instance.
 */
import type { InitOptions } from '../core/config.js';
import { ShutdownError } from '../core/errors.js';
import type { TensorLike } from '../core/types.js';
import {
  type AllgatherOptions,
  type AllreduceOptions,
  type BarrierOptions,
  type BroadcastOptions,
  type Result,
  RingReduce,
} from './runtime.js';

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
export const barrier = (o?: BarrierOptions): Promise<void> => instance().barrier(o);
export const barrierSync = (o?: BarrierOptions): void => instance().barrierSync(o);

/** Leaves the job (see RingReduce.shutdown); init() may be called again afterwards. */
export async function shutdown(): Promise<void> {
  const job = current;
  current = undefined;
  await job?.shutdown();
}
