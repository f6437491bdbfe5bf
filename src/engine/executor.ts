/**
 * Turns an agreed response into a run of one algorithm over the transport. Every rank calls
 * `execute` for the same responses in the same order, so the tag (a counter of executed
 * collectives) is the same on every rank and keeps the messages of consecutive collectives
 * apart. A response naming several allreduces (fusion.ts) runs once over a packed buffer.
 */

import { allreduce } from '../algorithms/allreduce.js';
import { broadcast } from '../algorithms/broadcast.js';
import type { AlgorithmOptions } from '../algorithms/options.js';
import type { KernelSelector } from '../algorithms/reduce.js';
import { ringAllgather } from '../algorithms/ring_allgather.js';
import { BufferPool } from '../core/buffer_pool.js';
import { allocShared, bytesPerElement } from '../core/dtypes.js';
import type { TypedArray } from '../core/types.js';
import type { Timeline } from '../observability/timeline.js';
import { kMaxTag, type NativeCollectives, nativeCollectivesOf, type Transport } from '../transport/transport.js';
import { fusedView, pack, unpack } from './fusion.js';
import type { ExecuteResponse } from './messages.js';
import type { Entry } from './tensor_queue.js';

export interface ExecutionResult {
  /** Allgather only: the output, allocated once the sizes of every rank are known. */
  output?: TypedArray;
  shape?: number[];
}

export interface ExecutorSettings {
  /** The reduce kernels (WebAssembly SIMD when available, see algorithms/reduce_wasm.ts). */
  kernels: KernelSelector;
  /** Largest fused buffer: the pool keeps that much (plus scratch) for reuse. */
  fusionThresholdBytes: number;
  /** Bytes per message of the pipelined algorithms. */
  segmentBytes: number;
  timeline?: Timeline | undefined;
}

/** Scratch the pool keeps beyond the fusion buffer (pipeline depth × segment, with room). */
const kScratchRetainBytes = 32 * 1024 * 1024;

export class Executor {
  private nextTag = 0;
  private readonly pool: BufferPool;
  private readonly native: NativeCollectives | undefined;
  /** Executions run, and how many of them were fused (ran more than one tensor). */
  readonly counts = { executions: 0, fused: 0 };

  constructor(
    private readonly transport: Transport,
    private readonly settings: ExecutorSettings,
  ) {
    this.native = nativeCollectivesOf(transport);
    this.pool = new BufferPool(settings.fusionThresholdBytes + kScratchRetainBytes);
  }

  /** Runs `response` for `entries` (one per name, in the response's order); one result per entry. */
  async execute(response: ExecuteResponse, entries: readonly Entry[]): Promise<ExecutionResult[]> {
    const tag = this.nextTag;
    this.nextTag = tag === kMaxTag ? 0 : tag + 1;
    this.counts.executions++;
    const first = entries[0] as Entry;
    const options = this.options(first.request.name);
    switch (response.op) {
      case 'allreduce':
        if (entries.length > 1) await this.fusedAllreduce(response, entries, tag, options);
        else if (first.buffer) await this.allreduce(response, first.buffer, tag, options, first.request.name);
        return entries.map(() => ({}));
      case 'broadcast': {
        const buffer = first.buffer;
        if (!buffer) return [{}];
        await this.communicate(first.request.name, buffer.byteLength, () =>
          this.native?.supports('broadcast', response.dtype)
            ? (this.native as NativeCollectives).broadcast(buffer, response.root)
            : broadcast(this.transport, buffer, response.root, tag, options),
        );
        return [{}];
      }
      case 'allgather':
        return [await this.allgather(response, first, tag, options)];
      case 'barrier':
        // Negotiation itself is the barrier: the response exists only once every rank arrived.
        return entries.map(() => ({}));
    }
  }

  close(): void {
    this.pool.clear();
  }

  private options(name: string): AlgorithmOptions {
    const { timeline, kernels, segmentBytes } = this.settings;
    return { pool: this.pool, segmentBytes, kernels: timeline ? timedKernels(kernels, timeline, name) : kernels };
  }

  private allreduce(response: ExecuteResponse, buf: TypedArray, tag: number, options: AlgorithmOptions, name: string) {
    return this.communicate(name, buf.byteLength, () =>
      this.native?.supports('allreduce', response.dtype, response.reduceOp)
        ? (this.native as NativeCollectives).allreduce(buf, response.reduceOp)
        : allreduce(this.transport, buf, response.reduceOp, tag, options),
    );
  }

  private async fusedAllreduce(response: ExecuteResponse, entries: readonly Entry[], tag: number, options: AlgorithmOptions) {
    this.counts.fused++;
    const parts = entries.map((e) => e.buffer as TypedArray);
    const elements = parts.reduce((n, p) => n + p.length, 0);
    const buffer = this.pool.acquire(elements * bytesPerElement(response.dtype));
    const name = (entries[0] as Entry).request.name;
    const timeline = this.settings.timeline;
    try {
      const fused = fusedView(response.dtype, buffer, elements);
      let t = timeline?.now() ?? 0;
      pack(parts, fused);
      timeline?.phase(name, 'FUSION_COPY', t, { tensors: parts.length, bytes: fused.byteLength });
      await this.allreduce(response, fused, tag, options, name);
      t = timeline?.now() ?? 0;
      unpack(fused, parts);
      timeline?.phase(name, 'FUSION_COPY', t, { tensors: parts.length, bytes: fused.byteLength });
    } finally {
      // allreduce settles only once nothing is in flight: the buffer is quiet here.
      this.pool.release(buffer);
    }
  }

  private async communicate(name: string, bytes: number, run: () => Promise<void>): Promise<void> {
    const timeline = this.settings.timeline;
    if (!timeline) return run();
    const t = timeline.now();
    await run();
    timeline.phase(name, 'COMMUNICATE', t, { bytes });
  }

  private async allgather(
    response: ExecuteResponse,
    entry: Entry,
    tag: number,
    options: AlgorithmOptions,
  ): Promise<ExecutionResult> {
    const { shape } = entry.request;
    const rowSize = shape.slice(1).reduce((a, b) => a * b, 1);
    const counts = response.firstDims.map((rows) => rows * rowSize);
    const total = counts.reduce((a, b) => a + b, 0);
    // The caller's 'out' (rank 0 checked its length), or fresh memory handed back with the result.
    const output = entry.output ?? allocShared(response.dtype, total);
    let offset = 0;
    for (let r = 0; r < this.transport.rank; r++) offset += counts[r] ?? 0;
    if (entry.buffer) output.set(entry.buffer as never, offset);
    await this.communicate(entry.request.name, output.byteLength, () =>
      this.native?.supports('allgather', response.dtype)
        ? (this.native as NativeCollectives).allgather(output, counts)
        : ringAllgather(this.transport, output, counts, tag, options),
    );
    const rows = response.firstDims.reduce((a, b) => a + b, 0);
    const gathered = [rows, ...shape.slice(1)];
    return entry.output ? { shape: gathered } : { output, shape: gathered };
  }
}

/** Wraps every kernel call in a REDUCE event on `name`'s row. */
function timedKernels(base: KernelSelector, timeline: Timeline, name: string): KernelSelector {
  return (dtype, op) => {
    const kernel = base(dtype, op);
    return (dst, d, src, s, n) => {
      const t = timeline.now();
      kernel(dst, d, src, s, n);
      timeline.phase(name, 'REDUCE', t, { elements: n });
    };
  };
}
