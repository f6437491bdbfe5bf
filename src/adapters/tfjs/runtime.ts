/**
 * Which ringreduce runtime the adapter talks to. Every adapter function takes an optional
 * `runtime`: a `RingReduce` instance (several runtimes in one process, as tests do), or by
 * default the module functions of 'ringreduce', which use the default instance.
 */
import * as rr from '../../index.js';

/** The part of a runtime the adapter uses; `RingReduce` instances and the module both fit. */
export type Collectives = Pick<
  rr.RingReduce,
  | 'rank'
  | 'size'
  | 'allreduce'
  | 'allreduceSync'
  | 'allgather'
  | 'allgatherSync'
  | 'broadcast'
  | 'broadcastSync'
  | 'reducescatter'
  | 'reducescatterSync'
  | 'alltoall'
  | 'alltoallSync'
  | 'gather'
  | 'gatherSync'
  | 'broadcastObject'
>;

export interface RuntimeOption {
  /** The runtime to use (default: the module functions of 'ringreduce'). */
  runtime?: Collectives;
}

export function collectivesOf(options?: RuntimeOption): Collectives {
  return options?.runtime ?? rr;
}
