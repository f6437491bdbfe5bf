/**
 * Tuning knobs shared by the algorithms. Every rank of a collective must pass the same
 * segmentBytes, treeMaxBytes, latencyMaxBytes, costModel, jobCostModel and algorithms: they decide the algorithm and the
 * number and length of the messages, and a receiver refuses a message whose length it did not
 * expect.
 */

import type { ForcedAlgorithms } from '../core/algorithm_names.js';
import type { BufferPool } from '../core/buffer_pool.js';
import { InvalidArgumentError } from '../core/errors.js';
import { type CostModel, kDefaultCostModel } from './cost_model.js';
import { type KernelSelector, selectKernel } from './reduce.js';

/** Large enough to amortise a message's fixed cost, small enough to keep every link busy. */
export const kDefaultSegmentBytes = 256 * 1024;
/** Segments in flight per direction: receives posted ahead and sends outstanding. */
export const kDefaultPipelineDepth = 4;

/** Allreduces of at most this many bytes take the latency path (recursive doubling) unless a cost model is given. */
export const kDefaultLatencyMaxBytes = 64 * 1024;

export interface AlgorithmOptions {
  /** Bytes per message of a pipelined transfer (rounded down to whole elements). Default 256 KiB. */
  segmentBytes?: number;
  /** Receives posted ahead and sends outstanding, per direction. Scratch is depth × segment. Default 4. */
  pipelineDepth?: number;
  /** Where reductions take their receive scratch; without one, each call allocates its own. */
  pool?: BufferPool;
  /** Picks the reduce kernels (the seam for a WebAssembly SIMD implementation). */
  kernels?: KernelSelector;
  /** Below kCostChoiceMinRanks ranks, broadcasts of at most this many bytes use a binomial tree, larger ones a pipelined chain. Default segmentBytes. */
  treeMaxBytes?: number;
  /**
   * Allreduces of at most this many bytes use recursive doubling, larger ones the ring, on any
   * rank count. Unset: 64 KiB below kCostChoiceMinRanks (8) ranks and the cost model from there
   * on, or the cost model everywhere when `costModel` is given (allreduce.ts).
   */
  latencyMaxBytes?: number;
  /** α, β and γ (seconds) of the cost model that picks the allreduce algorithm (cost_model.ts); unset ones keep their defaults. */
  costModel?: Partial<CostModel>;
  /**
   * The job's own α, β and γ (measured at start-up or configured: engine/cost_probe.ts) for the
   * choices made by cost from kCostChoiceMinRanks ranks on. Unlike `costModel` it leaves the fixed
   * choices below that rank count as they are; `costModel` wins where both are given.
   */
  jobCostModel?: Partial<CostModel>;
  /**
   * Algorithms forced per collective, in place of the choice by size and cost (the setting
   * RINGREDUCE_ALGORITHMS, without its `auto` entries). Every one runs on any rank count: those
   * written for powers of two fold the others (docs/algorithms.md, "Forcing an algorithm").
   */
  algorithms?: ForcedAlgorithms;
  /**
   * Every rank of the collective is on one host (the engine knows from the ranks' placements):
   * on 4 ranks a mid-size allreduce then runs Rabenseifner's (allreduce.ts). Across hosts the ring
   * stays, which crosses between hosts from fewer ranks.
   */
  oneHost?: boolean;
}

export interface ResolvedOptions {
  readonly segmentBytes: number;
  readonly pipelineDepth: number;
  readonly pool: BufferPool | undefined;
  readonly kernels: KernelSelector;
  readonly treeMaxBytes: number;
  readonly latencyMaxBytes: number | undefined;
  /** Whether `latencyMaxBytes` was given: it then decides at every rank count. */
  readonly latencyMaxBytesGiven: boolean;
  readonly costModel: CostModel;
  readonly algorithms: ForcedAlgorithms | undefined;
  readonly oneHost: boolean;
}

function costModelOf(given: Partial<CostModel> | undefined): CostModel {
  if (given === undefined) return kDefaultCostModel;
  const model = { ...kDefaultCostModel, ...given };
  for (const name of ['alpha', 'beta', 'gamma'] as const) {
    const value = model[name];
    if (!Number.isFinite(value) || value < 0) {
      throw new InvalidArgumentError(`costModel.${name} must be a finite number >= 0 (seconds), got ${value}`);
    }
  }
  return model;
}

function integerAtLeast(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(`${name} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}

/** Validates and fills in defaults; cheap enough to run per call. */
export function resolveOptions(options: AlgorithmOptions = {}): ResolvedOptions {
  const segmentBytes = integerAtLeast('segmentBytes', options.segmentBytes, kDefaultSegmentBytes, 1);
  return {
    segmentBytes,
    pipelineDepth: integerAtLeast('pipelineDepth', options.pipelineDepth, kDefaultPipelineDepth, 1),
    pool: options.pool,
    kernels: options.kernels ?? selectKernel,
    treeMaxBytes: integerAtLeast('treeMaxBytes', options.treeMaxBytes, segmentBytes, 0),
    // The fixed threshold stays the default until the model's α is measured per ring step in the
    // engine: with the transport's ping-pong α it picks the ring too early on 3 oversubscribed ranks.
    latencyMaxBytes:
      options.latencyMaxBytes === undefined
        ? options.costModel === undefined
          ? kDefaultLatencyMaxBytes
          : undefined
        : integerAtLeast('latencyMaxBytes', options.latencyMaxBytes, 0, 0),
    latencyMaxBytesGiven: options.latencyMaxBytes !== undefined,
    costModel: costModelOf(options.costModel ?? options.jobCostModel),
    algorithms: options.algorithms,
    oneHost: options.oneHost === true,
  };
}
