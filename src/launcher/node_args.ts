/**
 * The per-node mode's flags (`--nnodes`, `--node-rank`, `--nproc-per-node`, `--rdzv-endpoint`,
 * `--slurm`), resolved with Slurm's variables: `--slurm` takes the values not given from Slurm,
 * and so does any per-node flag inside an srun step (SLURM_STEP_ID set), so that
 * `srun --ntasks-per-node=1 ringrun --nproc-per-node 4 node train.js` needs nothing else.
 */

import { InvalidArgumentError } from '../core/errors.js';
import { slurmRendezvous } from '../core/slurm.js';
import { parseCount, parsePort } from './arg_values.js';
import type { PerNodeConfig } from './launch_config.js';

type Env = Readonly<Record<string, string | undefined>>;

/** torchrun's default rendezvous port, for an endpoint given without one. */
export const kDefaultRdzvPort = 29400;

/** The flags that select the per-node mode, as commander names them. */
export const kPerNodeFlags = ['nnodes', 'nodeRank', 'nprocPerNode', 'rdzvEndpoint'] as const;

/** `host:port`, `[v6::addr]:port`, or a host alone (port 29400). */
export function parseEndpoint(text: string): { host: string; port: number } {
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  let host: string;
  let port: string | undefined;
  if (bracketed) [host, port] = [bracketed[1] ?? '', bracketed[2]];
  else {
    const colon = text.lastIndexOf(':');
    const bareV6 = text.indexOf(':') !== colon;
    [host, port] = colon < 0 || bareV6 ? [text, undefined] : [text.slice(0, colon), text.slice(colon + 1)];
  }
  if (host === '' || /[\s/'"`$\\;|&<>]/.test(host)) {
    throw new InvalidArgumentError(`--rdzv-endpoint must be host:port, got '${text}'`);
  }
  return { host, port: port === undefined ? kDefaultRdzvPort : parsePort('--rdzv-endpoint', port) };
}

/** Inside an srun step: Slurm started this launcher, once per task. */
export function inSlurmStep(env: Env): boolean {
  return Boolean(env.SLURM_JOB_ID && env.SLURM_NODEID && (env.SLURM_STEP_ID || env.SLURM_STEPID));
}

/**
 * The per-node configuration, or undefined when no per-node flag is given (and not --slurm).
 * `flag(name)` reads a flag's value; `slurm`: --slurm was given.
 */
export function parsePerNode(flag: (name: string) => string | undefined, slurm: boolean, env: Env): PerNodeConfig | undefined {
  const given = kPerNodeFlags.filter((name) => flag(name) !== undefined);
  if (given.length === 0 && !slurm) return undefined;
  if (slurm && !env.SLURM_JOB_ID) {
    throw new InvalidArgumentError('--slurm: not inside a Slurm allocation (SLURM_JOB_ID is unset)');
  }
  const useSlurm = slurm || inSlurmStep(env);
  const fromSlurm: string[] = [];
  const slurmInt = (name: string): number | undefined => {
    const text = env[name];
    if (!useSlurm || text === undefined || !/^\d+$/.test(text)) return undefined;
    return Number(text);
  };

  const nnodesText = flag('nnodes');
  if (nnodesText?.includes(':')) throw new InvalidArgumentError(`--nnodes ${nnodesText} (MIN:MAX) needs --elastic`);
  let nnodes = nnodesText === undefined ? undefined : parseCount('--nnodes', nnodesText);
  if (nnodes === undefined) {
    const name = env.SLURM_STEP_NUM_NODES !== undefined ? 'SLURM_STEP_NUM_NODES' : 'SLURM_NNODES';
    nnodes = slurmInt(name);
    if (nnodes !== undefined) fromSlurm.push(`--nnodes ${nnodes} from ${name}`);
  }
  nnodes ??= 1;

  const rankText = flag('nodeRank');
  let nodeRank: number | undefined;
  if (rankText !== undefined) {
    if (!/^\d+$/.test(rankText)) throw new InvalidArgumentError(`--node-rank must be an integer >= 0, got '${rankText}'`);
    nodeRank = Number(rankText);
  } else {
    nodeRank = slurmInt('SLURM_NODEID');
    if (nodeRank !== undefined) fromSlurm.push(`--node-rank ${nodeRank} from SLURM_NODEID`);
  }
  if (nodeRank === undefined) {
    if (nnodes > 1)
      throw new InvalidArgumentError(`--node-rank is needed with --nnodes ${nnodes}: this node's index, 0 … ${nnodes - 1}`);
    nodeRank = 0;
  }
  if (nodeRank >= nnodes) {
    throw new InvalidArgumentError(`--node-rank ${nodeRank} is not a node of --nnodes ${nnodes} (0 … ${nnodes - 1})`);
  }

  const nprocText = flag('nprocPerNode');
  const nprocPerNode = nprocText === undefined ? 1 : parseCount('--nproc-per-node', nprocText);

  const endpointText = flag('rdzvEndpoint');
  let endpoint = endpointText === undefined ? undefined : parseEndpoint(endpointText);
  if (endpoint === undefined && useSlurm) {
    endpoint = slurmRendezvous(env);
    if (endpoint !== undefined) {
      const list = env.SLURM_STEP_NODELIST
        ? 'SLURM_STEP_NODELIST'
        : env.SLURM_JOB_NODELIST
          ? 'SLURM_JOB_NODELIST'
          : 'SLURM_NODELIST';
      fromSlurm.push(`--rdzv-endpoint ${endpoint.host}:${endpoint.port} from ${list} (its first node) and the job id`);
    }
  }
  if (endpoint === undefined && nnodes > 1) {
    throw new InvalidArgumentError(
      `--rdzv-endpoint host:port is needed with --nnodes ${nnodes}: where node 0's ringrun hosts the rendezvous, reachable from every node`,
    );
  }
  return { nnodes, nodeRank, nprocPerNode, endpoint, fromSlurm };
}
