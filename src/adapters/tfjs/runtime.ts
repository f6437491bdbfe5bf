/**
 * Which ringreduce runtime the adapter talks to, and in which process set. Every adapter
 * function takes an optional `runtime`: a `RingReduce` instance (several runtimes in one
 * process, as tests do), or by default the module functions of 'ringreduce', which use the
 * default instance. Those that run collectives also take an optional `processSet`: they then
 * involve its members only, and their ranks, roots and sizes are the set's.
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
  | 'join'
>;

/** The option of every adapter function and class that says which ringreduce runtime to use. */
export interface RuntimeOption {
  /** The runtime to use (default: the module functions of 'ringreduce'). */
  runtime?: Collectives;
}

/** The option of the adapter functions and classes that can run their collectives in a process set. */
export interface ProcessSetOption {
  /**
   * Run the collectives in this process set (from `rr.addProcessSet`): only its members take
   * part, and ranks, roots and sizes are the set's. Default: the whole job.
   */
  processSet?: rr.ProcessSet;
}

export function collectivesOf(options?: RuntimeOption): Collectives {
  return options?.runtime ?? rr;
}

/** Where collectives run: this rank's rank and the size there, and the core option to pass on. */
export interface Scope {
  rank: number;
  size: number;
  /** `{ processSet }`, or `{}` for the whole job. */
  options: { processSet?: rr.ProcessSet };
}

/**
 * The scope of `processSet` on `collectives` (the whole job without one). A set that is not a
 * ProcessSet, or that this rank is not a member of, is refused here, before any collective.
 */
export function scopeOf(collectives: Collectives, processSet: rr.ProcessSet | undefined): Scope {
  if (processSet === undefined) return { rank: collectives.rank(), size: collectives.size(), options: {} };
  if (!(processSet instanceof rr.ProcessSet)) {
    throw new rr.InvalidArgumentError(`processSet must be a ProcessSet (from addProcessSet), got ${String(processSet)}`);
  }
  const rank = collectives.rank();
  if (!processSet.includes(rank)) {
    throw new rr.InvalidArgumentError(
      `rank ${rank} is not in process set ${processSet.id} (ranks [${processSet.ranks.join(', ')}])`,
    );
  }
  return { rank: processSet.rank(), size: processSet.size(), options: { processSet } };
}
