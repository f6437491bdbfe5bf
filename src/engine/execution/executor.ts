/**
 * Turns an agreed response into a run of its collective (the operation's spec, ops/) over the
 * transport. Every rank calls `execute` for the same responses in the same order, so the tag (from
 * a counter of executed collectives, tags.ts) is the same on every rank and keeps the messages of
 * consecutive collectives apart. Eager collectives, whose data came with the ready round, are
 * finished here too (`finishEager`), so every reduction goes through one place.
 */

import type { CostModel } from '../../algorithms/cost_model.js';
import type { Hierarchy } from '../../algorithms/hierarchy.js';
import type { Hubs } from '../../algorithms/hubs.js';
import type { AlgorithmOptions } from '../../algorithms/options.js';
import type { KernelSelector } from '../../algorithms/reduce.js';
import type { ForcedAlgorithms } from '../../core/algorithm_names.js';
import { BufferPool } from '../../core/buffer_pool.js';
import type { HierarchicalMode, TypedArray } from '../../core/types.js';
import type { Timeline } from '../../observability/timeline.js';
import { type NativeCollectives, nativeCollectivesOf, type Transport } from '../../transport/transport.js';
import type { Entry } from '../negotiation/tensor_queue.js';
import type { ExecutionContext, ExecutionResult, Membership } from '../ops/op_spec.js';
import { specOf } from '../ops/registry.js';
import type { ExecuteResponse, Request } from '../wire/messages.js';
import { collectiveTag, kCollectiveTagCount } from '../wire/tags.js';

export type { ExecutionResult } from '../ops/op_spec.js';

export interface ExecutorSettings {
  /** The reduce kernels (WebAssembly SIMD when available, see algorithms/reduce_wasm.ts). */
  kernels: KernelSelector;
  /** Largest fused buffer: the pool keeps that much (plus scratch) for reuse. */
  fusionThresholdBytes: number;
  /** Bytes per message of the pipelined algorithms. */
  segmentBytes: number;
  /** The job's α, β and γ for the choices by cost from 8 ranks on (cost_probe.ts); unset: the built-in ones. */
  costModel?: Partial<CostModel>;
  /** Algorithms forced per collective (RINGREDUCE_ALGORITHMS, `auto` entries dropped at start-up). */
  algorithms?: ForcedAlgorithms | undefined;
  timeline?: Timeline | undefined;
  /** The process set whose collectives this executor runs (tags.ts); default 0, the world. */
  processSet?: number;
  /** The world's executor only: where the collectives that change the sets act. */
  membership?: Membership;
  /** The set's hosts, when its layout allows hierarchical collectives; and when to run them (Config). */
  hierarchy?: Hierarchy | undefined;
  /** The set's hubs and their leaves, when it mixes browser ranks with Node ranks (algorithms/hubs.ts). */
  hubs?: Hubs | undefined;
  hierarchicalAllreduce: HierarchicalMode;
  hierarchicalAllgather: HierarchicalMode;
  /** Every member of the set is on one host (the placements say so): algorithms/options.ts. */
  oneHost?: boolean;
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

  /** Runs `response` for `entries` (one per name, in the response's order); each entry's result at its index (missing: none). */
  execute(response: ExecuteResponse, entries: readonly Entry[]): Promise<readonly ExecutionResult[]> {
    const tag = collectiveTag(this.settings.processSet ?? 0, this.nextTag);
    this.nextTag = (this.nextTag + 1) % kCollectiveTagCount;
    this.counts.executions++;
    if (entries.length > 1) this.counts.fused++;
    const name = (entries[0] as Entry).request.name;
    return specOf(response.request).execute(this.context(tag, name), response, entries);
  }

  /** An agreed eager collective: `buffers` holds every rank's data, in rank order; the result goes to `into`. */
  finishEager(request: Request, buffers: readonly TypedArray[], into: TypedArray, firstIsScratch: boolean): void {
    const eager = specOf(request).eager;
    if (!eager) throw new Error(`${request.op} has no eager path`);
    const timeline = this.settings.timeline;
    const t = timeline?.now() ?? 0;
    eager.finish(request, buffers, into, this.settings.kernels, firstIsScratch);
    timeline?.phase(request.name, 'REDUCE', t, { elements: into.length });
  }

  close(): void {
    this.pool.clear();
  }

  private context(tag: number, name: string): ExecutionContext {
    const { timeline, segmentBytes } = this.settings;
    const kernels = timeline ? timedKernels(this.settings.kernels, timeline, name) : this.settings.kernels;
    const { costModel: jobCostModel, algorithms } = this.settings;
    const options: AlgorithmOptions = {
      pool: this.pool,
      segmentBytes,
      kernels,
      ...(jobCostModel && { jobCostModel }),
      ...(algorithms && { algorithms }),
      ...(this.settings.oneHost && { oneHost: true }),
    };
    return {
      transport: this.transport,
      tag,
      options,
      pool: this.pool,
      kernels,
      native: this.native,
      membership: this.settings.membership,
      hierarchy: this.settings.hierarchy,
      hubs: this.settings.hubs,
      hierarchicalAllreduce: this.settings.hierarchicalAllreduce,
      hierarchicalAllgather: this.settings.hierarchicalAllgather,
      async communicate(bytes, run) {
        if (!timeline) return run();
        const t = timeline.now();
        await run();
        timeline.phase(name, 'COMMUNICATE', t, { bytes });
      },
      local(phase, detail, run) {
        if (!timeline) return run();
        const t = timeline.now();
        const result = run();
        timeline.phase(name, phase, t, detail);
        return result;
      },
    };
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
