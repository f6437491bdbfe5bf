/**
 * Which launcher's variables made this process a rank (core/config.ts finds them), and how to say
 * so. Apart from config.ts so that the engine, which says it, does not load the option schema.
 */
import { kEnv } from './env_names.js';

/** Which variables made this process a rank of a job. */
export interface JobSource {
  /** "torchrun", "Slurm", "Open MPI", "PMI". */
  readonly launcher: string;
  /** The variables with their values, e.g. "RANK=1, WORLD_SIZE=4". */
  readonly variables: string;
  /**
   * Why these look left over rather than set by that launcher for this process (RANK and
   * WORLD_SIZE without torchrun's TORCHELASTIC_RUN_ID, Slurm's without an srun step), or
   * undefined when they look deliberate. Said as a warning at init.
   */
  readonly suspicious: string | undefined;
}

/**
 * "rank 1 of 4 because RANK=1, WORLD_SIZE=4 are set (...); set RINGREDUCE_SIZE=1 to run this
 * process alone": for the log line at init and the errors of a job that never gathers.
 */
export function joinedBecause(source: JobSource, rank: number, size: number): string {
  const why = source.suspicious === undefined ? `${source.launcher}'s variables` : source.suspicious;
  return `rank ${rank} of ${size} because ${source.variables} ${source.variables.includes(',') ? 'are' : 'is'} set (${why}); set ${kEnv.size}=1 to run this process alone`;
}
