/**
 * Where rank and size come from when no option sets them: RINGREDUCE_*, then the variables of
 * the launchers ringreduce runs under (Open MPI, torchrun, Slurm, PMI), in that order; and where
 * the rendezvous store is (RINGREDUCE_STORE_ADDR, torchrun's MASTER_ADDR/MASTER_PORT, Slurm's
 * first node). A source other than RINGREDUCE_* is recorded, so that a process that joined a job
 * because of variables left in its environment can say so.
 */
import { kEnv } from './env_names.js';
import { type Env, envInt } from './env_values.js';
import { InvalidArgumentError } from './errors.js';
import type { JobSource } from './job_source.js';
import { slurmPlacement, slurmRendezvous } from './slurm.js';

export interface EnvPlacement {
  rank: number;
  size: number;
  localRank: number | undefined;
  localSize: number | undefined;
  crossRank: number | undefined;
  crossSize: number | undefined;
  source: JobSource | undefined;
}

const kRingreduceSource = [kEnv.rank, kEnv.size, kEnv.localRank, kEnv.localSize] as const;

/** The launchers whose variables give rank and size, after RINGREDUCE_*, in precedence order. */
const kLauncherSources = [
  {
    launcher: 'Open MPI',
    names: ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_SIZE'],
    suspicious: () => undefined,
  },
  {
    launcher: 'torchrun',
    names: ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'],
    suspicious: (env: Env) =>
      env.TORCHELASTIC_RUN_ID ? undefined : "torchrun's variables, but TORCHELASTIC_RUN_ID is unset: torchrun did not set them",
  },
  {
    launcher: 'Slurm',
    names: ['SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID', 'SLURM_NTASKS_PER_NODE'],
    suspicious: (env: Env) =>
      env.SLURM_STEP_ID || env.SLURM_STEPID ? undefined : 'Slurm variables, but not of an srun step (SLURM_STEP_ID is unset)',
  },
  {
    launcher: 'PMI',
    names: ['PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID', 'MPI_LOCALNRANKS'],
    suspicious: () => undefined,
  },
] as const;

/** The first source, in precedence order, that sets both rank and size. */
export function placementFromEnv(env: Env): EnvPlacement | undefined {
  const [r, s, lr, ls] = kRingreduceSource;
  const size = envInt(env, s, 1);
  const rank = envInt(env, r);
  if (size !== undefined) {
    // RINGREDUCE_SIZE=1 alone runs this process alone, whatever other launchers' variables say.
    if (rank === undefined && size !== 1) throw new InvalidArgumentError(`${s}=${size} is set without ${r}`);
    return {
      rank: rank ?? 0,
      size,
      localRank: envInt(env, lr),
      localSize: envInt(env, ls, 1),
      crossRank: envInt(env, kEnv.crossRank),
      crossSize: envInt(env, kEnv.crossSize, 1),
      source: undefined,
    };
  }
  for (const { launcher, names, suspicious } of kLauncherSources) {
    const [rn, sn, lrn, lsn] = names;
    const rank = envInt(env, rn);
    const size = envInt(env, sn, 1);
    if (rank === undefined || size === undefined) continue;
    const variables = names.filter((name) => env[name] !== undefined && env[name] !== '');
    const source = {
      launcher,
      variables: variables.map((name) => `${name}=${env[name]}`).join(', '),
      suspicious: suspicious(env),
    };
    const base = { rank, size, localRank: envInt(env, lrn), localSize: envInt(env, lsn, 1), source };
    if (launcher === 'Slurm') return { ...base, ...slurmPlacement(env) };
    if (launcher === 'torchrun') {
      return { ...base, crossRank: envInt(env, 'GROUP_RANK'), crossSize: envInt(env, 'GROUP_WORLD_SIZE', 1) };
    }
    return { ...base, crossRank: envInt(env, kEnv.crossRank), crossSize: envInt(env, kEnv.crossSize, 1) };
  }
  return undefined;
}

/**
 * RINGREDUCE_STORE_ADDR; else MASTER_ADDR:MASTER_PORT, or the port next to it when torchrun's
 * agent hosts its own store there (TORCHELASTIC_USE_AGENT_STORE=True: rank 0 cannot bind that
 * port, and every rank derives the same neighbour); else, under Slurm, the step's first node.
 */
export function storeAddressFromEnv(env: Env, placement: EnvPlacement | undefined): string | undefined {
  if (env[kEnv.storeAddr]) return env[kEnv.storeAddr];
  if (env.MASTER_ADDR && env.MASTER_PORT) {
    const port = Number(env.MASTER_PORT);
    if (env.TORCHELASTIC_USE_AGENT_STORE === 'True' && Number.isSafeInteger(port) && port > 0 && port < 65535) {
      return `${formatHost(env.MASTER_ADDR)}:${port + 1}`;
    }
    return `${formatHost(env.MASTER_ADDR)}:${env.MASTER_PORT}`;
  }
  if (placement?.source?.launcher === 'Slurm') {
    const meet = slurmRendezvous(env);
    if (meet !== undefined) return `${formatHost(meet.host)}:${meet.port}`;
  }
  return undefined;
}

export function formatHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
