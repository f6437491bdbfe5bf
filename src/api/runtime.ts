/**
 * RingReduce: one rank's membership of a job. It owns the engine (a worker thread) and exposes
 * the collectives. The module-level functions of the package use a default instance; create
 * several instances to run several ranks in one process (the tests do).
 */
import { platform } from '#platform';
import { type Config, type InitOptions, resolveConfig } from '../core/config.js';
import { InvalidArgumentError, PeerFailureError, RingReduceError, TimeoutError } from '../core/errors.js';
import type { ShapedTensor, SharedTypedArray, TensorLike } from '../core/types.js';
import { kVersion } from '../core/version.js';
import { type RankStats, readStats } from '../engine/reporting/stats.js';
import type { ElasticMembership } from '../platform/platform.js';
import type { BackendName } from '../transport/backends.js';
import type { Result } from './call.js';
import { type CallOwner, Calls, type Prepare } from './calls.js';
import { EngineClient, type EngineLink } from './engine_client.js';
import type { GroupedOptions } from './grouped_options.js';
import { type AllgatherOptions, prepareAllgather } from './ops/allgather.js';
import { type AllreduceOptions, prepareAllreduce } from './ops/allreduce.js';
import { type AlltoallOptions, type AlltoallResult, prepareAlltoall } from './ops/alltoall.js';
import { type BarrierOptions, prepareBarrier } from './ops/barrier.js';
import { type BatchOp, type BatchResults, prepareBatchSendRecv } from './ops/batch_send_recv.js';
import { type BroadcastOptions, prepareBroadcast } from './ops/broadcast.js';
import { type GatherOptions, prepareGather } from './ops/gather.js';
import { type JoinOptions, prepareJoin } from './ops/join.js';
import {
  type MonitoredBarrierOptions,
  monitoredBarrier,
  monitoredBarrierSync,
  type PeerMessages,
  planMonitoredBarrier,
} from './ops/monitored_barrier.js';
import {
  type AllgatherObjectOptions,
  allgatherObject,
  allgatherObjectSync,
  type BroadcastObjectOptions,
  broadcastObject,
  broadcastObjectSync,
  type GatherObjectOptions,
  gatherObject,
  gatherObjectSync,
  type ScatterObjectOptions,
  scatterObject,
  scatterObjectSync,
} from './ops/objects.js';
import {
  prepareRecv,
  prepareSend,
  prepareSystemRecv,
  prepareSystemSend,
  type Received,
  type RecvOptions,
  type SendOptions,
} from './ops/point_to_point.js';
import { prepareAddProcessSet, prepareRemoveProcessSet } from './ops/process_set.js';
import { prepareReduce, type ReduceOptions } from './ops/reduce.js';
import { prepareReducescatter, type ReducescatterOptions } from './ops/reducescatter.js';
import { prepareScatter, type ScatterOptions } from './ops/scatter.js';
import { checkNewMembers, ProcessSet, parseSetRanks } from './process_set.js';

export type { AutotuneStats, OpStats, RankStats, StatOp } from '../engine/reporting/stats.js';
export type { Result } from './call.js';
export type { GroupedOptions } from './grouped_options.js';
export type { AllgatherOptions } from './ops/allgather.js';
export type { AllreduceOptions } from './ops/allreduce.js';
export type { AlltoallOptions, AlltoallResult } from './ops/alltoall.js';
export type { BarrierOptions } from './ops/barrier.js';
export type { BatchOp, BatchRecv, BatchResult, BatchResults, BatchSend } from './ops/batch_send_recv.js';
export type { BroadcastOptions } from './ops/broadcast.js';
export type { GatherOptions } from './ops/gather.js';
export type { JoinOptions } from './ops/join.js';
export type { MonitoredBarrierOptions } from './ops/monitored_barrier.js';
export type { AllgatherObjectOptions, BroadcastObjectOptions, GatherObjectOptions, ScatterObjectOptions } from './ops/objects.js';
export type { Received, RecvOptions, SendOptions } from './ops/point_to_point.js';
export type { ReduceOptions } from './ops/reduce.js';
export type { ReducescatterOptions } from './ops/reducescatter.js';
export type { ScatterOptions } from './ops/scatter.js';
export { ProcessSet } from './process_set.js';

/**
 * The program's own arguments, the same on every kind of rank: on Node, process.argv after the
 * script; in a browser rank, the words after the script on ringrun's command line. A program
 * that runs on both reads its options here.
 * @example const epochs = Number(rr.programArgs()[0] ?? 1);
 */
export function programArgs(): readonly string[] {
  return platform.programArgs();
}

/** The calls that take no tensor, shaped like the others (one function each, not one per call). */
const barrierCall: Prepare<undefined> = (context, _none, options) => prepareBarrier(context, options);
const joinCall: Prepare<undefined> = (context, _none, options) => prepareJoin(context, options);

/**
 * One rank of a job: its collectives, process sets and counters. `RingReduce.init()` makes one;
 * the module functions (`rr.init()`, `rr.allreduce()`, ...) act on a default instance, and a
 * process may hold several instances (several ranks, as tests do). Each rank's engine runs in a
 * worker thread, so the calls never block this thread except the `...Sync` ones.
 * @example
 * import { RingReduce } from 'ringreduce';
 * const rr = await RingReduce.init();
 * const sum = await rr.allreduce(new Float32Array([rr.rank()]));
 * await rr.shutdown();
 */
export class RingReduce {
  /** The life of this rank's calls: preparation, names in flight, pooled memory, submission (calls.ts). */
  private readonly calls: Calls;
  private shutDown = false;
  /** Cancels the shutdown that runs when the program ends without calling it (Platform.atProgramEnd). */
  private readonly cancelShutdownAtEnd: () => void;
  /** The process sets, by id: the world is not one of them. */
  private readonly sets = new Map<number, ProcessSet>();
  /** The id the next set gets: the same sequence on every rank (static sets first). */
  private nextSetId = 1;
  /** The monitored barriers this rank has made: each has a tag of its own, the same on every rank. */
  private monitoredBarriers = 0;
  /** The sets whose addProcessSet is in flight, by id: a second set of the same ranks is refused meanwhile too. */
  private readonly adding = new Map<number, { readonly id: number; readonly ranks: readonly number[] }>();

  private constructor(
    private current: Config,
    private engine: EngineLink,
    /** Elastic mode: where the generations come from (the platform's: Node's platform/node/elastic_worker.ts). */
    private readonly elastic?: ElasticMembership,
  ) {
    this.calls = new Calls(engine, this.owner());
    for (const ranks of current.processSets) this.registerSet(ranks);
    this.cancelShutdownAtEnd = platform.atProgramEnd(() => this.shutdown());
  }

  /**
   * Joins the job described by the environment (see docs/env.md), or by `options`, which win.
   * Resolves once every rank has joined and the connections are up.
   * @example const rr = await RingReduce.init(); console.log(rr.rank(), rr.size());
   */
  static async init(options: InitOptions = {}): Promise<RingReduce> {
    const config = resolveConfig(options, await platform.environment());
    if (config.elasticWorker !== undefined) {
      const worker = await platform.joinElastic(config, config.elasticWorker);
      const first = await worker.next();
      return new RingReduce(first, await EngineClient.start(first, platform), worker);
    }
    return new RingReduce(config, await EngineClient.start(config, platform));
  }

  /** The configuration of the job this rank is in now (an elastic job's changes with each generation). */
  get config(): Config {
    return this.current;
  }

  /** Elastic mode: the generation of the membership this rank runs in (1 first); 0 otherwise. */
  generation(): number {
    return this.elastic?.generation ?? 0;
  }

  /**
   * Elastic mode: the newest generation the launcher has published (asked of its store at most
   * every `maxAgeMs`); a commit compares it with this rank's (elastic/state.ts).
   */
  latestGeneration(maxAgeMs: number): Promise<number> {
    return this.elastic ? this.elastic.latest(maxAgeMs) : Promise.resolve(0);
  }

  /**
   * Elastic mode: leaves the current job (after a peer failed, or to let new workers in) and joins
   * the next generation that lists this rank: ranks are renumbered, process sets are gone, unnamed
   * calls count from 0 again. Called by elastic.run.
   */
  async reform(): Promise<void> {
    if (!this.elastic) throw new InvalidArgumentError('reform() needs an elastic job (ringrun --elastic)');
    await this.engine.shutdown();
    let config: Config;
    for (;;) {
      config = await this.elastic.next();
      try {
        this.engine = await EngineClient.start(config, platform);
        break;
      } catch (error) {
        // A member of this generation failed while it formed (its launcher saw it, or joins and a
        // failure crossed): the launcher publishes the next generation without it. Waiting for
        // that one has the start-up deadline, so this ends.
        if (!(error instanceof PeerFailureError) && !(error instanceof TimeoutError)) throw error;
      }
    }
    this.current = config;
    this.calls.restart(this.engine, this.owner());
    this.sets.clear();
    this.adding.clear();
    this.nextSetId = 1;
    this.monitoredBarriers = 0;
  }

  /**
   * A rank whose engine the caller has started itself (an engine in this thread, for tests that
   * run N ranks over the memory transport). `config` must be the engine's. Not part of the
   * public API.
   */
  static withEngine(config: Config, engine: EngineLink): RingReduce {
    return new RingReduce(config, engine);
  }

  /** This rank, `0 … size()-1` (renumbered when an elastic job re-forms). */
  rank(): number {
    return this.config.rank;
  }
  /** The number of ranks in the job. */
  size(): number {
    return this.config.size;
  }
  /** This rank among the ranks on its host, `0 … localSize()-1`. */
  localRank(): number {
    return this.config.localRank;
  }
  /** The number of ranks on this rank's host. */
  localSize(): number {
    return this.config.localSize;
  }
  /** The index of this rank's host among the job's hosts, `0 … crossSize()-1`. */
  crossRank(): number {
    return this.config.crossRank;
  }
  /** The number of hosts in the job. */
  crossSize(): number {
    return this.config.crossSize;
  }
  /** This package's version (package.json). */
  readonly version: string = kVersion;
  /** The backend this rank connected with: 'tcp', 'mpi' or 'solo' (one rank); 'memory' for in-process test worlds. */
  backend(): BackendName | 'memory' {
    return this.engine.backend ?? 'memory';
  }

  /**
   * This rank's counters since init (or an elastic job's last re-form): collectives completed and
   * failed, by operation, with their bytes; bytes sent and received; time in negotiation and in
   * execution; fusion ratio; response cache hits; what is pending. Read synchronously from memory
   * the engine thread updates (engine/reporting/stats.ts): cheap enough to call every step.
   * @example const s = rr.stats(); console.log(s.byOp.allreduce.completed, s.sentBytes, s.pending);
   */
  stats(): RankStats {
    const buffer = this.engine.statsBuffer;
    if (buffer === undefined) throw new RingReduceError('the engine of this rank keeps no stats (a test engine, in this thread)');
    return readStats(buffer);
  }

  /**
   * Reduces `tensor` element-wise across all ranks; every rank gets the result.
   * @example const sum = await rr.allreduce(new Float32Array([1, 2, 3]), { name: 'grad', op: 'sum' });
   */
  allreduce<T extends TensorLike>(tensor: T, options?: AllreduceOptions): Promise<Result<T>> {
    // The input is copied now, at call time; the promise settles when every rank has run it.
    return this.calls.run(prepareAllreduce, tensor, options) as Promise<Result<T>>;
  }
  /**
   * {@link RingReduce.allreduce}, blocking the calling thread (only) until done: the engine works
   * in its own thread meanwhile. For callers that cannot await, such as a TensorFlow.js optimizer
   * inside `model.fit`. Throws what the promise of the async call would reject with; on a browser
   * page's main thread, which may not block, it throws RingReduceError (every `...Sync` call does).
   */
  allreduceSync<T extends TensorLike>(tensor: T, options?: AllreduceOptions): Result<T> {
    return this.calls.runSync('allreduceSync', prepareAllreduce, tensor, options) as Result<T>;
  }

  /**
   * Concatenates every rank's tensor along the first dimension, in rank order. The first
   * dimension may differ per rank; the others must match.
   * @example const all = await rr.allgather({ data: rows, shape: [n, 4] }); // all.shape = [Σn, 4]
   */
  allgather<T extends TensorLike>(tensor: T, options?: AllgatherOptions): Promise<Result<T>> {
    return this.calls.run(prepareAllgather, tensor, options) as Promise<Result<T>>;
  }
  /** {@link RingReduce.allgather}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  allgatherSync<T extends TensorLike>(tensor: T, options?: AllgatherOptions): Result<T> {
    return this.calls.runSync('allgatherSync', prepareAllgather, tensor, options) as Result<T>;
  }

  /**
   * Every rank receives the root's tensor. Every rank passes a tensor of the same shape and
   * dtype; the non-roots' values are ignored (and never modified).
   * @example const w = await rr.broadcast(weights, { root: 0, name: 'weights' });
   */
  broadcast<T extends TensorLike>(tensor: T, options?: BroadcastOptions): Promise<Result<T>> {
    return this.calls.run(prepareBroadcast, tensor, options) as Promise<Result<T>>;
  }
  /** {@link RingReduce.broadcast}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  broadcastSync<T extends TensorLike>(tensor: T, options?: BroadcastOptions): Result<T> {
    return this.calls.runSync('broadcastSync', prepareBroadcast, tensor, options) as Result<T>;
  }

  /**
   * The element-wise reduction over ranks, split along the first dimension: rank r gets rows
   * [start_r, start_r + count_r), counts as even as possible (the first dim0 % size ranks one row
   * more). Half an allreduce's traffic: the building block of sharded optimizers.
   * @example const mine = await rr.reducescatter({ data: grads, shape: [rows, cols] }, { name: 'g', op: 'average' });
   */
  reducescatter<T extends TensorLike>(tensor: T, options?: ReducescatterOptions): Promise<Result<T>> {
    return this.calls.run(prepareReducescatter, tensor, options) as Promise<Result<T>>;
  }
  /** {@link RingReduce.reducescatter}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  reducescatterSync<T extends TensorLike>(tensor: T, options?: ReducescatterOptions): Result<T> {
    return this.calls.runSync('reducescatterSync', prepareReducescatter, tensor, options) as Result<T>;
  }

  /**
   * Sends splits[j] rows (first dimension) of `tensor` to rank j and receives, in rank order, the
   * rows every rank sends this one. The dimensions after the first must agree.
   * @example const { output, receivedSplits } = await rr.alltoall({ data: tokens, shape: [n, d] }, { splits });
   */
  alltoall<T extends TensorLike>(tensor: T, options?: AlltoallOptions): Promise<AlltoallResult<T>> {
    return this.calls.run(prepareAlltoall, tensor, options) as Promise<AlltoallResult<T>>;
  }
  /** {@link RingReduce.alltoall}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  alltoallSync<T extends TensorLike>(tensor: T, options?: AlltoallOptions): AlltoallResult<T> {
    return this.calls.runSync('alltoallSync', prepareAlltoall, tensor, options) as AlltoallResult<T>;
  }

  /**
   * The root gets the element-wise reduction of every rank's tensor; the other ranks resolve to null.
   * @example const total = await rr.reduce(counts, { root: 0, op: 'sum' }); // null except on rank 0
   */
  reduce<T extends TensorLike>(tensor: T, options?: ReduceOptions): Promise<Result<T> | null> {
    return this.calls.run(prepareReduce, tensor, options) as Promise<Result<T> | null>;
  }
  /** {@link RingReduce.reduce}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  reduceSync<T extends TensorLike>(tensor: T, options?: ReduceOptions): Result<T> | null {
    return this.calls.runSync('reduceSync', prepareReduce, tensor, options) as Result<T> | null;
  }

  /**
   * The root gets every rank's tensor concatenated along the first dimension, in rank order (the
   * first dimension may differ per rank); the other ranks resolve to null.
   * @example const all = await rr.gather({ data: preds, shape: [n, 10] }); // on rank 0: shape [Σn, 10]
   */
  gather<T extends TensorLike>(tensor: T, options?: GatherOptions): Promise<Result<T> | null> {
    return this.calls.run(prepareGather, tensor, options) as Promise<Result<T> | null>;
  }
  /** {@link RingReduce.gather}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  gatherSync<T extends TensorLike>(tensor: T, options?: GatherOptions): Result<T> | null {
    return this.calls.runSync('gatherSync', prepareGather, tensor, options) as Result<T> | null;
  }

  /**
   * The root's tensor split along the first dimension: rank r gets piece r as { data, shape }.
   * Only the root passes a tensor (and, optionally, the splits); the other ranks pass null.
   * @example const part = await rr.scatter(rr.rank() === 0 ? batch : null, { root: 0 });
   */
  scatter(tensor: TensorLike | null, options?: ScatterOptions): Promise<ShapedTensor<SharedTypedArray>> {
    return this.calls.run(prepareScatter, tensor, options) as Promise<ShapedTensor<SharedTypedArray>>;
  }
  /** {@link RingReduce.scatter}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  scatterSync(tensor: TensorLike | null, options?: ScatterOptions): ShapedTensor<SharedTypedArray> {
    return this.calls.runSync('scatterSync', prepareScatter, tensor, options) as ShapedTensor<SharedTypedArray>;
  }

  /**
   * Sends `tensor` to rank `to`, without involving the other ranks; it matches that rank's recv
   * from this one with the same tag (in call order). Resolves once the receiver has the data. A
   * recv of another dtype or length rejects on both sides with MismatchError.
   * @example await rr.send(activations, { to: rr.rank() + 1, tag: 7 });
   */
  async send(tensor: TensorLike, options: SendOptions): Promise<void> {
    await this.calls.run(prepareSend, tensor, options);
  }
  /** {@link RingReduce.send}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  sendSync(tensor: TensorLike, options: SendOptions): void {
    this.calls.runSync('sendSync', prepareSend, tensor, options);
  }

  /**
   * Receives the message rank `from` sends this rank with the same tag into `into` (same dtype and
   * length as the message), and resolves to `into`. With `from: 'any'` it takes the first
   * matching message from any rank (torch's `recv(t, src=None)`) and resolves to
   * `{ data: into, from }`, `from` being the sender (a rank of `processSet`, when given).
   * @example const acts = await rr.recv(new Float32Array(n), { from: rr.rank() - 1, tag: 7 });
   * @example const { data, from } = await rr.recv(new Float32Array(n), { from: 'any', tag: 7 });
   */
  recv<T extends TensorLike>(into: T, options: RecvOptions & { from: 'any' }): Promise<Received<T>>;
  recv<T extends TensorLike>(into: T, options: RecvOptions & { from: number }): Promise<T>;
  recv<T extends TensorLike>(into: T, options: RecvOptions): Promise<T | Received<T>> {
    return this.calls.run(prepareRecv, into, options) as Promise<T | Received<T>>;
  }
  /** {@link RingReduce.recv}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  recvSync<T extends TensorLike>(into: T, options: RecvOptions & { from: 'any' }): Received<T>;
  recvSync<T extends TensorLike>(into: T, options: RecvOptions & { from: number }): T;
  recvSync<T extends TensorLike>(into: T, options: RecvOptions): T | Received<T> {
    return this.calls.runSync('recvSync', prepareRecv, into, options) as T | Received<T>;
  }

  /**
   * Posts several sends and recvs at once (torch's `batch_isend_irecv`): entries
   * `{ op: 'send', tensor, to, tag?, timeoutMs?, processSet? }` and
   * `{ op: 'recv', into, from, tag?, timeoutMs?, processSet? }`, each matched as the send or recv
   * it names. Since all are under way together, rings and exchanges cannot deadlock. Resolves,
   * once every entry has completed, to their results in order (undefined for a send, `into` or,
   * for `from: 'any'`, `{ data: into, from }` for a recv); if some failed, rejects with the error
   * of the first of them in the list, after the others have settled. An invalid entry is refused
   * before any is posted.
   * @example
   * const [, fromLeft] = await rr.batchSendRecv([
   *   { op: 'send', tensor: mine, to: (rank + 1) % size },
   *   { op: 'recv', into: new Float32Array(n), from: (rank + size - 1) % size },
   * ]);
   */
  batchSendRecv<const Ops extends readonly BatchOp[]>(ops: Ops): Promise<BatchResults<Ops>> {
    return this.calls.run(this.batchCall, ops, undefined) as Promise<BatchResults<Ops>>;
  }
  /**
   * {@link RingReduce.batchSendRecv}, blocking the calling thread until every entry is done (see
   * {@link RingReduce.allreduceSync}): the way to exchange with ...Sync calls without deadlock.
   */
  batchSendRecvSync<const Ops extends readonly BatchOp[]>(ops: Ops): BatchResults<Ops> {
    return this.calls.runSync('batchSendRecvSync', this.batchCall, ops, undefined) as BatchResults<Ops>;
  }

  /**
   * Every rank's `value` (any structured-clone value: objects, arrays, Maps, typed arrays...), in rank order.
   * @example const hosts = await rr.allgatherObject({ host: os.hostname(), gpus: 0 });
   */
  allgatherObject<V>(value: V, options?: AllgatherObjectOptions): Promise<V[]> {
    return allgatherObject(this, value, options) as Promise<V[]>;
  }
  /** {@link RingReduce.allgatherObject}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  allgatherObjectSync<V>(value: V, options?: AllgatherObjectOptions): V[] {
    return allgatherObjectSync(this, value, options) as V[];
  }

  /**
   * The root's `value` (any structured-clone value), on every rank; the others' values are ignored.
   * @example const config = await rr.broadcastObject(rr.rank() === 0 ? loadConfig() : undefined);
   */
  broadcastObject<V>(value: V, options?: BroadcastObjectOptions): Promise<V> {
    return broadcastObject(this, value, options) as Promise<V>;
  }
  /** {@link RingReduce.broadcastObject}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  broadcastObjectSync<V>(value: V, options?: BroadcastObjectOptions): V {
    return broadcastObjectSync(this, value, options) as V;
  }

  /**
   * Every rank's `value` (any structured-clone value), in rank order, on the root; null on the
   * other ranks (torch's gather_object). One gather of the values' bytes.
   * @example const metrics = await rr.gatherObject({ rank: rr.rank(), loss }); // an array on rank 0, null elsewhere
   */
  gatherObject<V>(value: V, options?: GatherObjectOptions): Promise<V[] | null> {
    return gatherObject(this, value, options) as Promise<V[] | null>;
  }
  /** gatherObject that blocks the calling thread (only) until done. */
  gatherObjectSync<V>(value: V, options?: GatherObjectOptions): V[] | null {
    return gatherObjectSync(this, value, options) as V[] | null;
  }

  /**
   * The root's `values[r]` on rank r (torch's scatter_object_list): the root passes one
   * structured-clone value per rank (of the set), the other ranks' `values` are ignored (pass
   * null). One scatter of the values' bytes.
   * @example const shard = await rr.scatterObject(rr.rank() === 0 ? fileLists : null); // this rank's list
   */
  scatterObject<V>(values: readonly V[] | null, options?: ScatterObjectOptions): Promise<V> {
    return scatterObject(this, values, options) as Promise<V>;
  }
  /** scatterObject that blocks the calling thread (only) until done. */
  scatterObjectSync<V>(values: readonly V[] | null, options?: ScatterObjectOptions): V {
    return scatterObjectSync(this, values, options) as V;
  }

  /**
   * Allreduces several tensors as one unit (Horovod's grouped_allreduce): none of them runs before
   * all are ready on every rank, they run fused, and the results come back in order. The tensors
   * may differ in dtype and shape; the options apply to every one (`name` names the group), except
   * `outs`: one result buffer per tensor (the tensors themselves: in place).
   * @example const [a, b] = await rr.groupedAllreduce([gradA, gradB], { name: 'step', op: 'average' });
   */
  groupedAllreduce<T extends TensorLike>(
    tensors: readonly T[],
    options?: GroupedOptions<AllreduceOptions>,
  ): Promise<Result<T>[]> {
    return this.calls.runGroup('groupedAllreduce', tensors, options, prepareAllreduce) as Promise<Result<T>[]>;
  }

  /** allgather of several tensors as one unit (see groupedAllreduce). */
  groupedAllgather<T extends TensorLike>(
    tensors: readonly T[],
    options?: GroupedOptions<AllgatherOptions>,
  ): Promise<Result<T>[]> {
    return this.calls.runGroup('groupedAllgather', tensors, options, prepareAllgather) as Promise<Result<T>[]>;
  }

  /** reducescatter of several tensors as one unit (see groupedAllreduce). */
  groupedReducescatter<T extends TensorLike>(
    tensors: readonly T[],
    options?: GroupedOptions<ReducescatterOptions>,
  ): Promise<Result<T>[]> {
    return this.calls.runGroup('groupedReducescatter', tensors, options, prepareReducescatter) as Promise<Result<T>[]>;
  }

  /**
   * broadcast of several tensors from one root as one unit (Horovod's grouped broadcast of a
   * model's variables): none runs before all are submitted on every rank, and they are released
   * together (one broadcast each: broadcasts are not fused). `outs`: as for groupedAllreduce.
   * @example const [w, b] = await rr.groupedBroadcast([weights, biases], { root: 0, name: 'model' });
   */
  groupedBroadcast<T extends TensorLike>(
    tensors: readonly T[],
    options?: GroupedOptions<BroadcastOptions>,
  ): Promise<Result<T>[]> {
    return this.calls.runGroup('groupedBroadcast', tensors, options, prepareBroadcast) as Promise<Result<T>[]>;
  }

  /**
   * This rank has no more data (Horovod's join): until every rank of the set has joined, it still
   * takes part in the collectives the others submit, as a neutral contributor (allreduce and
   * reducescatter get the op's identity, and an average divides by the ranks that contributed;
   * allgather and gather get zero rows; a barrier counts it as arrived; a broadcast, reduce or
   * gather whose root has joined fails naming the root; alltoall and scatter fail). Resolves on
   * every rank, once all have joined, to the rank that joined last; the set then goes on as before.
   * While it is pending, this rank makes no other collective in the set.
   * @example for (const batch of myShard) await step(batch); const last = await rr.join();
   */
  async join(options?: JoinOptions): Promise<number> {
    return this.calls.join(joinCall, options);
  }

  /**
   * Adds a process set: a collective of the whole job, which every rank calls with the same ranks
   * (a rank outside the set gets the set too, with `includes(rank())` false). Collectives given
   * `{ processSet }` then involve its members only. Different ranks on different ranks reject
   * with MismatchError on every rank. As in Horovod, a set of every rank, or of the same ranks as a
   * set this rank has (in any order), is refused with InvalidArgumentError: every rank holds the
   * same sets, so every rank refuses it alike, before anything is sent.
   * @example const evens = await rr.addProcessSet([0, 2]); if (evens.includes(rr.rank())) await rr.allreduce(x, { processSet: evens });
   */
  async addProcessSet(ranks: readonly number[]): Promise<ProcessSet> {
    const members = parseSetRanks(ranks, this.config.size);
    checkNewMembers(members, this.config.size, [...this.sets.values(), ...this.adding.values()]);
    // Every rank numbers its sets in call order: the same id everywhere, checked in negotiation.
    const id = this.nextSetId++;
    this.adding.set(id, { id, ranks: members });
    try {
      await this.calls.submit(prepareAddProcessSet(this.calls.worldContext, id, members));
    } finally {
      this.adding.delete(id);
    }
    const set = new ProcessSet(id, Object.freeze(members), this.config.rank, this);
    this.sets.set(id, set);
    return set;
  }

  /**
   * Removes a process set: a collective of the whole job. Its collectives still queued reject with
   * InvalidArgumentError on its members; later calls with it are refused.
   */
  async removeProcessSet(set: ProcessSet): Promise<void> {
    if (!(set instanceof ProcessSet) || set.owner !== this || set.removed) {
      throw new InvalidArgumentError(
        `removeProcessSet needs a process set of this runtime that is not removed, got ${String(set)}`,
      );
    }
    await this.calls.submit(prepareRemoveProcessSet(this.calls.worldContext, set.id));
    set.markRemoved();
    this.sets.delete(set.id);
    this.calls.forgetSet(set.id);
  }

  /** The process sets defined and not removed, in the order they were added (init's first). */
  processSets(): ProcessSet[] {
    return [...this.sets.values()];
  }

  /** Resolves once every rank has called barrier. */
  async barrier(options?: BarrierOptions): Promise<void> {
    await this.calls.run(barrierCall, undefined, options);
  }
  /** {@link RingReduce.barrier}, blocking the calling thread until done (see {@link RingReduce.allreduceSync}). */
  barrierSync(options?: BarrierOptions): void {
    this.calls.runSync('barrierSync', barrierCall, undefined, options);
  }

  /**
   * A barrier with a deadline (torch's monitored_barrier): resolves once every rank has called it;
   * a rank that has not within `timeoutMs` is named by rank 0 in a TimeoutError, which every rank
   * that did arrive rejects with too (`waitAll`: every missing rank, else the first), and the job
   * goes on. Made of point-to-point messages to and from rank 0 (ops/monitored_barrier.ts), so for
   * the whole job only; every rank makes its monitored barriers in the same order.
   * @example await rr.monitoredBarrier({ timeoutMs: 30_000, waitAll: true }); // names the ranks that hang
   */
  monitoredBarrier(options?: MonitoredBarrierOptions): Promise<void> {
    try {
      return monitoredBarrier(this.planMonitoredBarrier(options), this.peerMessages('monitoredBarrier'));
    } catch (error) {
      return Promise.reject(error);
    }
  }
  /** monitoredBarrier that blocks the calling thread (only) until done. */
  monitoredBarrierSync(options?: MonitoredBarrierOptions): void {
    monitoredBarrierSync(this.planMonitoredBarrier(options), this.peerMessages('monitoredBarrierSync'));
  }

  /**
   * Leaves the job: collectives still queued reject with ShutdownError, and the engine waits
   * (up to the I/O timeout) for the other ranks to shut down too, like MPI_Finalize.
   */
  async shutdown(): Promise<void> {
    if (this.shutDown) return;
    this.shutDown = true;
    this.cancelShutdownAtEnd();
    this.calls.close();
    await this.engine.shutdown();
    await this.elastic?.close();
    platform.rankClosed();
  }

  /** batchSendRecv's preparation, each entry in the context of its own 'processSet'. */
  private readonly batchCall: Prepare<unknown> = (world, ops) =>
    prepareBatchSendRecv(world, ops, (set) => this.calls.contextOf(set));

  /** What the calls need of this rank: its place in the job (an elastic job's changes with each generation). */
  private owner(): CallOwner {
    return { runtime: this, rank: this.current.rank, size: this.current.size };
  }

  private planMonitoredBarrier(options: unknown) {
    const place = { rank: this.config.rank, size: this.config.size, stallTimeoutMs: this.config.stallTimeoutMs };
    const plan = planMonitoredBarrier(options, { ...place, call: this.monitoredBarriers });
    this.monitoredBarriers++;
    return plan;
  }

  /** Sends and recvs of the library's own messages (tags no user message has), for `method`. */
  private peerMessages(method: string): PeerMessages {
    return {
      send: async (data, options) => {
        await this.calls.run(prepareSystemSend, data, options);
      },
      recv: (into, options) => this.calls.run(prepareSystemRecv, into, options),
      sendSync: (data, options) => {
        this.calls.runSync(method, prepareSystemSend, data, options);
      },
      recvSync: (into, options) => this.calls.runSync(method, prepareSystemRecv, into, options),
    };
  }

  private registerSet(ranks: readonly number[]): ProcessSet {
    const set = new ProcessSet(this.nextSetId++, Object.freeze([...ranks]), this.config.rank, this);
    this.sets.set(set.id, set);
    return set;
  }
}
