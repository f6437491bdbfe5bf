/**
 * RingReduce: one rank's membership of a job. It owns the engine (a worker thread) and exposes
 * the collectives. The module-level functions of the package use a default instance; create
 * several instances to run several ranks in one process (the tests do).
 */
import { BufferPool } from '../core/buffer_pool.js';
import { type Config, type InitOptions, resolveConfig } from '../core/config.js';
import { allocShared, bytesPerElement, viewOf } from '../core/dtypes.js';
import { InvalidArgumentError, ShutdownError } from '../core/errors.js';
import { SharedMemoryReclaimer } from '../core/shared_memory_reclaimer.js';
import type { CollectiveOp, ReduceOp, ShapedTensor, TensorLike, TypedArray } from '../core/types.js';
import type { Request } from '../engine/messages.js';
import { type Call, type Completion, EngineClient, type EngineLink } from './engine_client.js';
import {
  checkOptions,
  type ParsedTensor,
  parseGatherOut,
  parseName,
  parseOut,
  parseReduceOp,
  parseRoot,
  parseTensor,
} from './tensor_args.js';

export interface AllreduceOptions {
  /** Same name on every rank = same collective. Default: named by call order per op. */
  name?: string;
  /** Default 'sum'. 'average' needs a float dtype. */
  op?: ReduceOp;
  /**
   * Write the result here (same dtype and length, SharedArrayBuffer-backed; may be the input)
   * instead of into fresh memory: a loop that reuses it skips the page faults of new memory.
   */
  out?: TypedArray;
}
export interface AllgatherOptions {
  name?: string;
  /**
   * Write the result here instead of into fresh memory (SharedArrayBuffer-backed, the tensor's
   * dtype, exactly as long as the gathered result: the sum of every rank's first dimension times
   * the elements per row). A wrong length fails on every rank with InvalidArgumentError.
   */
  out?: TypedArray;
}
export interface BroadcastOptions {
  name?: string;
  /** The rank whose tensor every rank receives. Default 0. */
  root?: number;
  /** As for allreduce: where the result goes, reused across calls. */
  out?: TypedArray;
}
export interface BarrierOptions {
  name?: string;
}

/** A typed array in gives the same class out; { data, shape } in gives { data, shape } out. */
export type Result<T extends TensorLike> = T extends TypedArray ? T : T extends ShapedTensor<infer D> ? ShapedTensor<D> : never;

/** A collective prepared on the caller's thread: the request and the buffers it owns. */
interface Prepared extends Call {
  /** Pooled memory `buffer` views (allgather's input copy), returned to the pool once the call settles. */
  staging?: SharedArrayBuffer;
  finish: (completion: Completion) => unknown;
}

/**
 * Allgather input copies kept for reuse, at most (in free buffers): enough for the input of a
 * 512 MiB allgather on 2 ranks. What is kept stays resident, like the caller's own tensors.
 */
const kStagingRetainBytes = 256 * 1024 * 1024;

export class RingReduce {
  private readonly unnamedCounters: Record<CollectiveOp, number> = {
    allreduce: 0,
    allgather: 0,
    broadcast: 0,
    barrier: 0,
  };
  private readonly inFlight = new Set<string>();
  /**
   * Fresh outputs are SharedArrayBuffers, which V8 is slow to free: see shared_memory_reclaimer.ts.
   * Adaptive: a loop of large fresh outputs gets its old ones freed, and reused by malloc, soon.
   */
  private readonly reclaimer = new SharedMemoryReclaimer({ adaptive: true });
  /**
   * Memory for allgather's input copy (the engine needs it shared, and the output's layout is
   * only known after negotiation), reused: fresh memory costs its page faults at first touch,
   * which made a 16 MiB allgather on 2 ranks take 42 ms instead of 8 here.
   */
  private readonly staging = new BufferPool<SharedArrayBuffer>(kStagingRetainBytes, (bytes) => new SharedArrayBuffer(bytes));
  private shutDown = false;

  private constructor(
    readonly config: Config,
    private readonly engine: EngineLink,
  ) {}

  /**
   * Joins the job described by the environment (see docs/env.md), or by `options`, which win.
   * Resolves once every rank has joined and the connections are up.
   * @example const rr = await RingReduce.init(); console.log(rr.rank(), rr.size());
   */
  static async init(options: InitOptions = {}): Promise<RingReduce> {
    const config = resolveConfig(options);
    return new RingReduce(config, await EngineClient.start(config));
  }

  /**
   * A rank whose engine the caller has started itself (an engine in this thread, for tests that
   * run N ranks over the memory transport). `config` must be the engine's. Not part of the
   * public API.
   */
  static withEngine(config: Config, engine: EngineLink): RingReduce {
    return new RingReduce(config, engine);
  }

  rank(): number {
    return this.config.rank;
  }
  size(): number {
    return this.config.size;
  }
  localRank(): number {
    return this.config.localRank;
  }
  localSize(): number {
    return this.config.localSize;
  }
  crossRank(): number {
    return this.config.crossRank;
  }
  crossSize(): number {
    return this.config.crossSize;
  }

  /**
   * Reduces `tensor` element-wise across all ranks; every rank gets the result.
   * @example const sum = await rr.allreduce(new Float32Array([1, 2, 3]), { name: 'grad', op: 'sum' });
   */
  async allreduce<T extends TensorLike>(tensor: T, options?: AllreduceOptions): Promise<Result<T>> {
    // The synchronous part of an async function runs at call time: the input is copied now.
    return this.run(this.prepareAllreduce(tensor, options)) as Promise<Result<T>>;
  }
  /** allreduce that blocks the calling thread (only) until done. */
  allreduceSync<T extends TensorLike>(tensor: T, options?: AllreduceOptions): Result<T> {
    return this.runSync(this.prepareAllreduce(tensor, options)) as Result<T>;
  }

  /**
   * Concatenates every rank's tensor along the first dimension, in rank order. The first
   * dimension may differ per rank; the others must match.
   * @example const all = await rr.allgather({ data: rows, shape: [n, 4] }); // all.shape = [Σn, 4]
   */
  async allgather<T extends TensorLike>(tensor: T, options?: AllgatherOptions): Promise<Result<T>> {
    return this.run(this.prepareAllgather(tensor, options)) as Promise<Result<T>>;
  }
  allgatherSync<T extends TensorLike>(tensor: T, options?: AllgatherOptions): Result<T> {
    return this.runSync(this.prepareAllgather(tensor, options)) as Result<T>;
  }

  /**
   * Every rank receives the root's tensor. Every rank passes a tensor of the same shape and
   * dtype; the non-roots' values are ignored (and never modified).
   * @example const w = await rr.broadcast(weights, { root: 0, name: 'weights' });
   */
  async broadcast<T extends TensorLike>(tensor: T, options?: BroadcastOptions): Promise<Result<T>> {
    return this.run(this.prepareBroadcast(tensor, options)) as Promise<Result<T>>;
  }
  broadcastSync<T extends TensorLike>(tensor: T, options?: BroadcastOptions): Result<T> {
    return this.runSync(this.prepareBroadcast(tensor, options)) as Result<T>;
  }

  /** Resolves once every rank has called barrier. */
  async barrier(options?: BarrierOptions): Promise<void> {
    await this.run(this.prepareBarrier(options));
  }
  barrierSync(options?: BarrierOptions): void {
    this.runSync(this.prepareBarrier(options));
  }

  /**
   * Leaves the job: collectives still queued reject with ShutdownError, and the engine waits
   * (up to the I/O timeout) for the other ranks to shut down too, like MPI_Finalize.
   */
  async shutdown(): Promise<void> {
    if (this.shutDown) return;
    this.shutDown = true;
    await this.engine.shutdown();
  }

  private prepareAllreduce(tensor: unknown, options: unknown): Prepared {
    const o = checkOptions(options, ['name', 'op', 'out']);
    const t = parseTensor(tensor);
    const reduceOp = parseReduceOp(o.op, t.dtype);
    const out = parseOut(o.out, t);
    const output = out ?? this.fresh(t);
    if (output !== t.data) output.set(t.data as never);
    const prepared = this.prepared('allreduce', parseName(o.name), t, reduceOp, -1, output);
    if (!out) prepared.fresh = true;
    return prepared;
  }

  private prepareAllgather(tensor: unknown, options: unknown): Prepared {
    const o = checkOptions(options, ['name', 'out']);
    const t = parseTensor(tensor);
    if (t.shape.length === 0) {
      throw new InvalidArgumentError('tensor of allgather must have at least one dimension (it is concatenated along the first)');
    }
    const out = parseGatherOut(o.out, t);
    const staging = this.staging.acquire(t.data.length * bytesPerElement(t.dtype));
    const input = viewOf(t.dtype, staging, 0, t.data.length);
    input.set(t.data as never);
    const prepared = this.prepared('allgather', parseName(o.name), t, 'sum', -1, input, out);
    if (out) prepared.request.outLength = out.length;
    prepared.staging = staging;
    return prepared;
  }

  private prepareBroadcast(tensor: unknown, options: unknown): Prepared {
    const o = checkOptions(options, ['name', 'root', 'out']);
    const t = parseTensor(tensor);
    const root = parseRoot(o.root, this.config.size);
    const out = parseOut(o.out, t);
    const output = out ?? this.fresh(t);
    if (root === this.config.rank && output !== t.data) output.set(t.data as never);
    const prepared = this.prepared('broadcast', parseName(o.name), t, 'sum', root, output);
    if (!out) prepared.fresh = true;
    return prepared;
  }

  /** Fresh shared memory for the engine to work on; counted so that it is freed in time. */
  private fresh(t: ParsedTensor): TypedArray {
    const array = allocShared(t.dtype, t.data.length);
    this.reclaimer.release(array.byteLength);
    return array;
  }

  private prepareBarrier(options: unknown): Prepared {
    const o = checkOptions(options, ['name']);
    const request: Request = {
      name: this.nameFor('barrier', parseName(o.name)),
      op: 'barrier',
      dtype: 'uint8',
      shape: [0],
      reduceOp: 'sum',
      root: -1,
    };
    return { request, buffer: undefined, finish: () => undefined };
  }

  private prepared(
    op: CollectiveOp,
    name: string | undefined,
    t: ParsedTensor,
    reduceOp: ReduceOp,
    root: number,
    buffer: TypedArray,
    output?: TypedArray,
  ): Prepared {
    const request: Request = { name: this.nameFor(op, name), op, dtype: t.dtype, shape: t.shape, reduceOp, root };
    const finish = (completion: Completion) => {
      const data = completion.output ?? output ?? buffer;
      const shape = completion.shape ?? t.shape;
      return t.shaped ? { data, shape } : data;
    };
    return output ? { request, buffer, output, finish } : { request, buffer, finish };
  }

  private nameFor(op: CollectiveOp, name: string | undefined): string {
    // Unnamed calls are matched across ranks by their order per op; '#' keeps them apart from user names.
    return name ?? `${op}#${this.unnamedCounters[op]++}`;
  }

  private claimName(request: Request): void {
    if (this.shutDown) throw new ShutdownError(`${request.op} '${request.name}': ringreduce has been shut down`);
    if (this.inFlight.has(request.name)) {
      throw new InvalidArgumentError(`a collective named '${request.name}' is already in flight on rank ${this.config.rank}`);
    }
    this.inFlight.add(request.name);
  }

  private async run(prepared: Prepared): Promise<unknown> {
    this.claim(prepared);
    try {
      return prepared.finish(await this.engine.submit(prepared));
    } finally {
      this.inFlight.delete(prepared.request.name);
    }
  }

  private runSync(prepared: Prepared): unknown {
    this.claim(prepared);
    try {
      return prepared.finish(this.engine.submitSync(prepared));
    } finally {
      this.inFlight.delete(prepared.request.name);
    }
  }

  /**
   * Marks the name in flight, and has the call's staging memory go back to the pool once the
   * engine is done with it (`released`). A call refused here gives it back at once.
   */
  private claim(prepared: Prepared): void {
    const staging = prepared.staging;
    if (staging) prepared.released = () => this.staging.release(staging);
    try {
      this.claimName(prepared.request);
    } catch (error) {
      prepared.released?.();
      throw error;
    }
  }
}
