/**
 * The package's module-level functions (`rr.init()`, `rr.allreduce()`, ...), which act on one
 * default RingReduce instance, as Horovod's `hvd.*` do. This is the only module-level state in
 * the library, and it is only a facade: everything lives in the instance.
 */
import type { InitOptions } from '../core/config.js';
import { InvalidArgumentError, ShutdownError } from '../core/errors.js';
import type { ShapedTensor, SharedTypedArray, TensorLike } from '../core/types.js';
import { kVersion } from '../core/version.js';
import {
  type AllgatherObjectOptions,
  type AllgatherOptions,
  type AllreduceOptions,
  type AlltoallOptions,
  type AlltoallResult,
  type AutotuneStats,
  type BarrierOptions,
  type BatchOp,
  type BatchRecv,
  type BatchResult,
  type BatchResults,
  type BatchSend,
  type BroadcastObjectOptions,
  type BroadcastOptions,
  type GatherObjectOptions,
  type GatherOptions,
  type GroupedOptions,
  type JoinOptions,
  type MonitoredBarrierOptions,
  type OpStats,
  type ProcessSet,
  type RankStats,
  type Received,
  type RecvOptions,
  type ReduceOptions,
  type ReducescatterOptions,
  type Result,
  RingReduce,
  type ScatterObjectOptions,
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
  AutotuneStats,
  BarrierOptions,
  BatchOp,
  BatchRecv,
  BatchResult,
  BatchResults,
  BatchSend,
  BroadcastObjectOptions,
  BroadcastOptions,
  GatherObjectOptions,
  GatherOptions,
  GroupedOptions,
  JoinOptions,
  MonitoredBarrierOptions,
  OpStats,
  RankStats,
  Received,
  RecvOptions,
  ReduceOptions,
  ReducescatterOptions,
  Result,
  ScatterObjectOptions,
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
 * @param options the settings of docs/env.md, each winning over its environment variable ({@link InitOptions})
 * @example await rr.init(); console.log(`rank ${rr.rank()} of ${rr.size()}`);
 * @example await rr.init({ startTimeoutMs: 120_000, logLevel: 'info' });
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

/**
 * The default instance, for APIs that take a runtime. Throws ShutdownError before init().
 * @example const job = rr.runtime(); console.log(job.rank());
 */
export function runtime(): RingReduce {
  return instance();
}

export { programArgs } from './runtime.js';

/** This package's version, e.g. '0.1.0'. */
export const version: string = kVersion;

/**
 * This rank, `0 … size()-1`. Throws ShutdownError before init().
 * @example if (rr.rank() === 0) console.log('rank 0 logs for the job');
 */
export const rank = (): number => instance().rank();
/**
 * The number of ranks in the job.
 * @example const lr = 0.001 * rr.size(); // scale the learning rate with the global batch
 */
export const size = (): number => instance().size();
/**
 * This rank among the ranks on this host, `0 … localSize()-1`.
 * @example if (rr.localRank() === 0) await downloadDatasetOnce();
 */
export const localRank = (): number => instance().localRank();
/**
 * The number of ranks on this host.
 * @example const threads = Math.max(1, Math.floor(os.availableParallelism() / rr.localSize()));
 */
export const localSize = (): number => instance().localSize();
/**
 * The index of this host among the job's hosts, `0 … crossSize()-1`.
 * @example console.log(`host ${rr.crossRank()} of ${rr.crossSize()}`);
 */
export const crossRank = (): number => instance().crossRank();
/**
 * The number of hosts in the job.
 * @example console.log(`host ${rr.crossRank()} of ${rr.crossSize()}`);
 */
export const crossSize = (): number => instance().crossSize();
/**
 * Whether init() has completed (and shutdown() has not been called since).
 * @example if (!rr.isInitialized()) await rr.init();
 */
export const isInitialized = (): boolean => current !== undefined;
/**
 * The backend this rank connected with: 'tcp', 'mpi', 'web' or 'solo' (a job of one rank); see {@link RingReduce.backend}.
 * @example console.log(`rank ${rr.rank()} uses ${rr.backend()}`);
 */
export const backend = (): ReturnType<RingReduce['backend']> => instance().backend();
/**
 * This rank's counters since init, read without a round trip to the engine: {@link RingReduce.stats}.
 * @example const { completed, byOp } = rr.stats(); console.log(completed, byOp.allreduce);
 */
export const stats = (): RankStats => instance().stats();

/**
 * Element-wise reduction across ranks; every rank gets the result: {@link RingReduce.allreduce}.
 * @param tensor a typed array, or `{ data, shape }`; the same dtype and shape on every rank
 * @param options `name` (the same on every rank), `op` (default `'sum'`), `out`, `prescale`, `postscale`, `compression`, `processSet`
 * @returns a new tensor of the same kind as `tensor` (or `options.out`), backed by shared memory
 * @example const avg = await rr.allreduce(new Float32Array([1, 2, 3]), { name: 'grad', op: 'average' });
 */
export const allreduce = <T extends TensorLike>(tensor: T, options?: AllreduceOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.allreduce(tensor, options));
/**
 * {@link allreduce}, blocking this thread until done (for callers that cannot await): {@link RingReduce.allreduceSync}.
 * @param tensor a typed array, or `{ data, shape }`
 * @param options as for {@link allreduce}
 * @example const sum = rr.allreduceSync(new Float32Array([rr.rank()]), { name: 'ranks' });
 */
export const allreduceSync = <T extends TensorLike>(tensor: T, options?: AllreduceOptions): Result<T> =>
  instance().allreduceSync(tensor, options);
/**
 * Every rank's tensor concatenated along the first dimension, in rank order: {@link RingReduce.allgather}.
 * @param tensor a typed array, or `{ data, shape }`; the first dimension may differ per rank, the others must match
 * @param options `name`, `out`, `compression`, `processSet`
 * @example const all = await rr.allgather({ data: rows, shape: [rows.length / 4, 4] }); // all.shape: [Σn, 4]
 */
export const allgather = <T extends TensorLike>(tensor: T, options?: AllgatherOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.allgather(tensor, options));
/**
 * {@link allgather}, blocking this thread until done.
 * @param tensor a typed array, or `{ data, shape }`
 * @param options as for {@link allgather}
 * @example const ranks = rr.allgatherSync(new Int32Array([rr.rank()])); // [0, 1, …]
 */
export const allgatherSync = <T extends TensorLike>(tensor: T, options?: AllgatherOptions): Result<T> =>
  instance().allgatherSync(tensor, options);
/**
 * The root's tensor on every rank: {@link RingReduce.broadcast}.
 * @param tensor every rank passes a tensor of the same shape and dtype; the root's is sent
 * @param options `root` (default 0), `name`, `out`, `processSet`
 * @example const weights = await rr.broadcast(myWeights, { root: 0, name: 'weights' });
 */
export const broadcast = <T extends TensorLike>(tensor: T, options?: BroadcastOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.broadcast(tensor, options));
/**
 * {@link broadcast}, blocking this thread until done.
 * @param tensor every rank passes a tensor of the same shape and dtype
 * @param options as for {@link broadcast}
 * @example const seed = rr.broadcastSync(new Uint32Array([Date.now() >>> 0]), { name: 'seed' });
 */
export const broadcastSync = <T extends TensorLike>(tensor: T, options?: BroadcastOptions): Result<T> =>
  instance().broadcastSync(tensor, options);
/**
 * The reduction across ranks, split along the first dimension: this rank's rows of the allreduce: {@link RingReduce.reducescatter}.
 * @param tensor a typed array, or `{ data, shape }`; the same on every rank
 * @param options `name`, `op`, `out`, `prescale`, `postscale`, `compression`, `processSet`
 * @example const mine = await rr.reducescatter({ data: grads, shape: [rows, cols] }, { op: 'average' });
 */
export const reducescatter = <T extends TensorLike>(tensor: T, options?: ReducescatterOptions): Promise<Result<T>> =>
  withInstance((rr) => rr.reducescatter(tensor, options));
/**
 * {@link reducescatter}, blocking this thread until done.
 * @param tensor a typed array, or `{ data, shape }`
 * @param options as for {@link reducescatter}
 * @example const mine = rr.reducescatterSync(new Float32Array(4 * rr.size()).fill(1));
 */
export const reducescatterSync = <T extends TensorLike>(tensor: T, options?: ReducescatterOptions): Result<T> =>
  instance().reducescatterSync(tensor, options);
/**
 * Rows sent to and received from every rank: {@link RingReduce.alltoall}.
 * @param tensor the rows to send, `{ data, shape }` or a typed array
 * @param options `splits` (rows to each rank; default an even split), `name`, `out`, `processSet`
 * @returns `{ output, receivedSplits }`: the rows received, rank 0's first, and how many came from each rank
 * @example const { output, receivedSplits } = await rr.alltoall({ data: tokens, shape: [n, d] }, { splits });
 */
export const alltoall = <T extends TensorLike>(tensor: T, options?: AlltoallOptions): Promise<AlltoallResult<T>> =>
  withInstance((rr) => rr.alltoall(tensor, options));
/**
 * {@link alltoall}, blocking this thread until done.
 * @param tensor the rows to send
 * @param options as for {@link alltoall}
 * @example const { output } = rr.alltoallSync(new Int32Array(rr.size()).fill(rr.rank()));
 */
export const alltoallSync = <T extends TensorLike>(tensor: T, options?: AlltoallOptions): AlltoallResult<T> =>
  instance().alltoallSync(tensor, options);
/**
 * The reduction across ranks, on the root only (`null` elsewhere): {@link RingReduce.reduce}.
 * @param tensor a typed array, or `{ data, shape }`; the same on every rank
 * @param options `root` (default 0), `op`, `name`, `out`, `processSet`
 * @example const total = await rr.reduce(new Float64Array([loss]), { root: 0 }); // null on other ranks
 */
export const reduce = <T extends TensorLike>(tensor: T, options?: ReduceOptions): Promise<Result<T> | null> =>
  withInstance((rr) => rr.reduce(tensor, options));
/**
 * {@link reduce}, blocking this thread until done.
 * @param tensor a typed array, or `{ data, shape }`
 * @param options as for {@link reduce}
 * @example const total = rr.reduceSync(new Float64Array([loss])); // null except on rank 0
 */
export const reduceSync = <T extends TensorLike>(tensor: T, options?: ReduceOptions): Result<T> | null =>
  instance().reduceSync(tensor, options);
/**
 * Every rank's tensor concatenated along the first dimension, on the root only (`null` elsewhere): {@link RingReduce.gather}.
 * @param tensor a typed array, or `{ data, shape }`; the first dimension may differ per rank
 * @param options `root` (default 0), `name`, `out`, `processSet`
 * @example const all = await rr.gather(new Float32Array([accuracy])); // on rank 0: one value per rank
 */
export const gather = <T extends TensorLike>(tensor: T, options?: GatherOptions): Promise<Result<T> | null> =>
  withInstance((rr) => rr.gather(tensor, options));
/**
 * {@link gather}, blocking this thread until done.
 * @param tensor a typed array, or `{ data, shape }`
 * @param options as for {@link gather}
 * @example const all = rr.gatherSync(new Float32Array([accuracy]));
 */
export const gatherSync = <T extends TensorLike>(tensor: T, options?: GatherOptions): Result<T> | null =>
  instance().gatherSync(tensor, options);
/**
 * The root's tensor split along the first dimension, one piece per rank: {@link RingReduce.scatter}.
 * @param tensor the tensor to split on the root; `null` on the other ranks
 * @param options `root` (default 0), `splits` (the root's rows per rank), `name`, `out`, `processSet`
 * @returns this rank's piece, `{ data, shape }`
 * @example const part = await rr.scatter(rr.rank() === 0 ? batch : null, { root: 0 });
 */
export const scatter = (tensor: TensorLike | null, options?: ScatterOptions): Promise<ShapedTensor<SharedTypedArray>> =>
  withInstance((rr) => rr.scatter(tensor, options));
/**
 * {@link scatter}, blocking this thread until done.
 * @param tensor the tensor to split on the root; `null` on the other ranks
 * @param options as for {@link scatter}
 * @example const part = rr.scatterSync(rr.rank() === 0 ? batch : null);
 */
export const scatterSync = (tensor: TensorLike | null, options?: ScatterOptions): ShapedTensor<SharedTypedArray> =>
  instance().scatterSync(tensor, options);
/**
 * Sends a tensor to one rank, which receives it with {@link recv}: {@link RingReduce.send}.
 * @param tensor what to send
 * @param options `to` (the receiving rank), `tag` (default 0: matches the recv with the same tag), `timeoutMs`, `processSet`
 * @example await rr.send(activations, { to: rr.rank() + 1 });
 */
export const send = (tensor: TensorLike, options: SendOptions): Promise<void> => withInstance((rr) => rr.send(tensor, options));
/**
 * {@link send}, blocking this thread until done.
 * @param tensor what to send
 * @param options as for {@link send}
 * @example rr.sendSync(activations, { to: 1, tag: 7 });
 */
export const sendSync = (tensor: TensorLike, options: SendOptions): void => instance().sendSync(tensor, options);
/**
 * Receives what one rank sends this rank, into `into`: {@link RingReduce.recv}.
 * @param into the tensor to fill: the sender's dtype and length
 * @param options `from` (the sending rank, or `'any'`), `tag` (default 0), `timeoutMs`, `processSet`
 * @returns `into`, filled; for `from: 'any'`, `{ data: into, from }` with the sender's rank
 * @example const activations = await rr.recv(new Float32Array(1024), { from: rr.rank() - 1 });
 * @example const { data, from } = await rr.recv(new Float32Array(1024), { from: 'any' });
 */
export function recv<T extends TensorLike>(into: T, options: RecvOptions & { from: 'any' }): Promise<Received<T>>;
/** {@link recv} from one rank: resolves to `into`, filled. */
export function recv<T extends TensorLike>(into: T, options: RecvOptions & { from: number }): Promise<T>;
/** The implementation of both forms. */
export function recv<T extends TensorLike>(into: T, options: RecvOptions): Promise<T | Received<T>> {
  return withInstance((rr) => rr.recv(into, options as RecvOptions & { from: number }));
}
/**
 * {@link recv}, blocking this thread until done.
 * @param into the tensor to fill
 * @param options as for {@link recv}
 * @example const got = rr.recvSync(new Float32Array(1024), { from: 0, tag: 7 });
 */
export function recvSync<T extends TensorLike>(into: T, options: RecvOptions & { from: 'any' }): Received<T>;
/** {@link recvSync} from one rank: returns `into`, filled. */
export function recvSync<T extends TensorLike>(into: T, options: RecvOptions & { from: number }): T;
/** The implementation of both forms. */
export function recvSync<T extends TensorLike>(into: T, options: RecvOptions): T | Received<T> {
  return instance().recvSync(into, options as RecvOptions & { from: number });
}
/**
 * Several sends and recvs posted at once (torch's batch_isend_irecv): {@link RingReduce.batchSendRecv}.
 * @param ops `{ op: 'send', tensor, to, ... }` and `{ op: 'recv', into, from, ... }` entries
 * @returns the entries' results in order: undefined for a send, `into` (or `{ data, from }`) for a recv
 * @example const [, left] = await rr.batchSendRecv([{ op: 'send', tensor: x, to: next }, { op: 'recv', into: y, from: prev }]);
 */
export const batchSendRecv = <const Ops extends readonly BatchOp[]>(ops: Ops): Promise<BatchResults<Ops>> =>
  withInstance((rr) => rr.batchSendRecv(ops));
/**
 * {@link batchSendRecv}, blocking this thread until every entry is done.
 * @param ops as for {@link batchSendRecv}
 * @example rr.batchSendRecvSync([{ op: 'send', tensor: x, to: next }, { op: 'recv', into: y, from: prev }]);
 */
export const batchSendRecvSync = <const Ops extends readonly BatchOp[]>(ops: Ops): BatchResults<Ops> =>
  instance().batchSendRecvSync(ops);
/**
 * Every rank's value (any structured-clone value), in rank order: {@link RingReduce.allgatherObject}.
 * @param value this rank's value
 * @param options `name`, `processSet`
 * @example const hosts = await rr.allgatherObject(os.hostname()); // one per rank
 */
export const allgatherObject = <V>(value: V, options?: AllgatherObjectOptions): Promise<V[]> =>
  withInstance((rr) => rr.allgatherObject(value, options));
/**
 * {@link allgatherObject}, blocking this thread until done.
 * @param value this rank's value
 * @param options as for {@link allgatherObject}
 * @example const counts = rr.allgatherObjectSync({ rank: rr.rank(), samples: 128 });
 */
export const allgatherObjectSync = <V>(value: V, options?: AllgatherObjectOptions): V[] =>
  instance().allgatherObjectSync(value, options);
/**
 * The root's value (any structured-clone value) on every rank: {@link RingReduce.broadcastObject}.
 * @param value the root's value is sent; the others' are ignored (pass `undefined`)
 * @param options `root` (default 0), `name`, `processSet`
 * @example const config = await rr.broadcastObject(rr.rank() === 0 ? { epochs: 8 } : undefined);
 */
export const broadcastObject = <V>(value: V, options?: BroadcastObjectOptions): Promise<V> =>
  withInstance((rr) => rr.broadcastObject(value, options));
/**
 * {@link broadcastObject}, blocking this thread until done.
 * @param value the root's value is sent; the others' are ignored
 * @param options as for {@link broadcastObject}
 * @example const config = rr.broadcastObjectSync(rr.rank() === 0 ? { epochs: 8 } : undefined);
 */
export const broadcastObjectSync = <V>(value: V, options?: BroadcastObjectOptions): V =>
  instance().broadcastObjectSync(value, options);
/**
 * Every rank's value (any structured-clone value) in rank order, on the root only (`null` elsewhere): {@link RingReduce.gatherObject}.
 * @param value this rank's value
 * @param options `root` (default 0), `name`, `processSet`
 * @example const results = await rr.gatherObject({ rank: rr.rank(), accuracy }); // an array on rank 0, null elsewhere
 */
export const gatherObject = <V>(value: V, options?: GatherObjectOptions): Promise<V[] | null> =>
  withInstance((rr) => rr.gatherObject(value, options));
/**
 * {@link gatherObject}, blocking this thread until done.
 * @param value this rank's value
 * @param options as for {@link gatherObject}
 * @example const results = rr.gatherObjectSync({ rank: rr.rank(), accuracy });
 */
export const gatherObjectSync = <V>(value: V, options?: GatherObjectOptions): V[] | null =>
  instance().gatherObjectSync(value, options);
/**
 * One of the root's values on each rank (`values[r]` on rank r): {@link RingReduce.scatterObject}.
 * @param values on the root, one structured-clone value per rank; ignored elsewhere (pass `null`)
 * @param options `root` (default 0), `name`, `processSet`
 * @returns this rank's value
 * @example const myFiles = await rr.scatterObject(rr.rank() === 0 ? filesPerRank : null);
 */
export const scatterObject = <V>(values: readonly V[] | null, options?: ScatterObjectOptions): Promise<V> =>
  withInstance((rr) => rr.scatterObject(values, options));
/**
 * {@link scatterObject}, blocking this thread until done.
 * @param values on the root, one value per rank; ignored elsewhere
 * @param options as for {@link scatterObject}
 * @example const myFiles = rr.scatterObjectSync(rr.rank() === 0 ? filesPerRank : null);
 */
export const scatterObjectSync = <V>(values: readonly V[] | null, options?: ScatterObjectOptions): V =>
  instance().scatterObjectSync(values, options);
/**
 * Allreduces several tensors as one unit, fused; the results in order: {@link RingReduce.groupedAllreduce}.
 * @param tensors the tensors (any dtypes and shapes), the same list on every rank
 * @param options as for {@link allreduce}, for the whole group, with `outs` (one result buffer per tensor; the tensors themselves: in place) for `out`
 * @example const [a, b] = await rr.groupedAllreduce([gradA, gradB], { name: 'step', op: 'average' });
 */
export const groupedAllreduce = <T extends TensorLike>(
  tensors: readonly T[],
  options?: GroupedOptions<AllreduceOptions>,
): Promise<Result<T>[]> => withInstance((rr) => rr.groupedAllreduce(tensors, options));
/**
 * Allgathers several tensors as one unit: {@link RingReduce.groupedAllgather}.
 * @param tensors the tensors, the same list on every rank
 * @param options as for {@link allgather}, for the whole group
 * @example const [xs, ys] = await rr.groupedAllgather([myXs, myYs], { name: 'batch' });
 */
export const groupedAllgather = <T extends TensorLike>(
  tensors: readonly T[],
  options?: GroupedOptions<AllgatherOptions>,
): Promise<Result<T>[]> => withInstance((rr) => rr.groupedAllgather(tensors, options));
/**
 * Reducescatters several tensors as one unit: {@link RingReduce.groupedReducescatter}.
 * @param tensors the tensors, the same list on every rank
 * @param options as for {@link reducescatter}, for the whole group
 * @example const [a, b] = await rr.groupedReducescatter([gradA, gradB], { op: 'average' });
 */
export const groupedReducescatter = <T extends TensorLike>(
  tensors: readonly T[],
  options?: GroupedOptions<ReducescatterOptions>,
): Promise<Result<T>[]> => withInstance((rr) => rr.groupedReducescatter(tensors, options));
/**
 * Broadcasts several tensors from one root as one unit: {@link RingReduce.groupedBroadcast}.
 * @param tensors the tensors (any dtypes and shapes), the same list on every rank; the root's values are sent
 * @param options as for {@link broadcast}, for the whole group, with `outs` (one result buffer per tensor)
 * @example const [w, b] = await rr.groupedBroadcast([weights, biases], { root: 0, name: 'model' });
 */
export const groupedBroadcast = <T extends TensorLike>(
  tensors: readonly T[],
  options?: GroupedOptions<BroadcastOptions>,
): Promise<Result<T>[]> => withInstance((rr) => rr.groupedBroadcast(tensors, options));
/**
 * This rank has no more data; resolves to the last rank to join: {@link RingReduce.join}.
 * @param options `processSet` (then it resolves to a rank of the set)
 * @example for (const batch of myShard) await trainStep(batch); const last = await rr.join();
 */
export const join = (options?: JoinOptions): Promise<number> => withInstance((rr) => rr.join(options));
/**
 * Adds a process set, a subset of the ranks with collectives of its own (a collective of the whole job): {@link RingReduce.addProcessSet}.
 * @param ranks the set's ranks, the same on every rank of the job
 * @example const evens = await rr.addProcessSet([0, 2]);
 */
export const addProcessSet = (ranks: readonly number[]): Promise<ProcessSet> => withInstance((rr) => rr.addProcessSet(ranks));
/**
 * Removes a process set (a collective of the whole job): {@link RingReduce.removeProcessSet}.
 * @param set a set returned by {@link addProcessSet} or listed by {@link processSets}
 * @example await rr.removeProcessSet(evens);
 */
export const removeProcessSet = (set: ProcessSet): Promise<void> => withInstance((rr) => rr.removeProcessSet(set));
/**
 * The process sets defined and not removed, in the order they were added.
 * @example for (const set of rr.processSets()) console.log(set.id, set.ranks);
 */
export const processSets = (): ProcessSet[] => instance().processSets();
/**
 * Resolves once every rank has called barrier: {@link RingReduce.barrier}.
 * @param options `name`, `processSet`
 * @example await rr.barrier(); // every rank has written its checkpoint
 */
export const barrier = (options?: BarrierOptions): Promise<void> => withInstance((rr) => rr.barrier(options));
/**
 * {@link barrier}, blocking this thread until done.
 * @param options as for {@link barrier}
 * @example rr.barrierSync();
 */
export const barrierSync = (options?: BarrierOptions): void => instance().barrierSync(options);
/**
 * A barrier with a deadline that names the ranks that did not arrive (torch's monitored_barrier): {@link RingReduce.monitoredBarrier}.
 * @param options `timeoutMs` (default: the stall timeout), `waitAll` (name every missing rank, not only the first)
 * @example await rr.monitoredBarrier({ timeoutMs: 30_000, waitAll: true });
 */
export const monitoredBarrier = (options?: MonitoredBarrierOptions): Promise<void> =>
  withInstance((rr) => rr.monitoredBarrier(options));
/**
 * {@link monitoredBarrier}, blocking this thread until done.
 * @param options as for {@link monitoredBarrier}
 * @example rr.monitoredBarrierSync({ timeoutMs: 30_000 });
 */
export const monitoredBarrierSync = (options?: MonitoredBarrierOptions): void => instance().monitoredBarrierSync(options);

/**
 * Leaves the job (see {@link RingReduce.shutdown}); init() may be called again afterwards.
 * @example await rr.shutdown();
 */
export async function shutdown(): Promise<void> {
  const job = current;
  current = undefined;
  if (job) wasShutDown = true;
  await job?.shutdown();
}
