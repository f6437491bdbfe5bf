/**
 * The elastic per-node mode's flags: `ringrun --elastic --nnodes MIN:MAX --nproc-per-node P
 * --rdzv-endpoint host:port [--rdzv-id ID] [--rdzv-last-call DURATION]`, as torchrun's. Node
 * indices come from the rendezvous, so `--node-rank` (and the flags of one ringrun for the
 * whole job) are refused by name.
 */
import { InvalidArgumentError } from '../../core/errors.js';
import { parseCount, parseDuration } from '../arg_values.js';
import type { ElasticNodesConfig } from '../launch_config.js';
import { parseEndpoint } from '../node_args.js';

const kDefaultLastCallMs = 1000;
const kDefaultRdzvId = 'none';

/** `N` or `MIN:MAX`. */
export function parseNodeRange(text: string): { minNodes: number; maxNodes: number } {
  const [low, high, extra] = text.split(':');
  if (extra !== undefined || low === undefined) throw new InvalidArgumentError(`--nnodes must be N or MIN:MAX, got '${text}'`);
  const minNodes = parseCount('--nnodes', low);
  const maxNodes = high === undefined ? minNodes : parseCount('--nnodes', high);
  if (maxNodes < minNodes) throw new InvalidArgumentError(`--nnodes ${text}: MIN must not exceed MAX`);
  return { minNodes, maxNodes };
}

/**
 * The configuration, or undefined when no per-node flag is given (a one-ringrun elastic job).
 * `flag(name)` reads a flag's value (commander's names); `elasticTimeoutMs`: --elastic-timeout.
 */
export function parseElasticNodes(
  flag: (name: string) => string | undefined,
  elasticTimeoutMs: number,
): ElasticNodesConfig | undefined {
  const nnodes = flag('nnodes');
  const endpoint = flag('rdzvEndpoint');
  if (nnodes === undefined && endpoint === undefined && flag('nprocPerNode') === undefined) {
    for (const name of ['rdzvId', 'rdzvLastCall'] as const) {
      if (flag(name) !== undefined) throw new InvalidArgumentError(`--${kebab(name)} needs --nnodes and --rdzv-endpoint`);
    }
    return undefined;
  }
  const refused: [string, string][] = [
    ['nodeRank', '--node-rank: node indices are assigned at the rendezvous'],
    ['minNp', '--min-np: give --nnodes MIN:MAX'],
    ['maxNp', '--max-np: give --nnodes MIN:MAX'],
    ['hostDiscoveryScript', '--host-discovery-script: nodes join by starting their ringrun'],
    ['discoveryInterval', '--discovery-interval: nodes join by starting their ringrun'],
  ];
  for (const [name, why] of refused) {
    if (flag(name) !== undefined) throw new InvalidArgumentError(`the elastic per-node mode takes no ${why}`);
  }
  if (nnodes === undefined) throw new InvalidArgumentError('--elastic per node needs --nnodes MIN:MAX');
  if (endpoint === undefined) {
    throw new InvalidArgumentError(
      '--elastic per node needs --rdzv-endpoint host:port: where the node that can bind it hosts the rendezvous',
    );
  }
  const nproc = flag('nprocPerNode');
  const lastCall = flag('rdzvLastCall');
  const rdzvId = flag('rdzvId') ?? kDefaultRdzvId;
  if (!/^[\w.-]{1,64}$/.test(rdzvId)) {
    throw new InvalidArgumentError(`--rdzv-id must be 1 to 64 letters, digits, '.', '_' or '-', got '${rdzvId}'`);
  }
  return {
    ...parseNodeRange(nnodes),
    nprocPerNode: nproc === undefined ? 1 : parseCount('--nproc-per-node', nproc),
    endpoint: parseEndpoint(endpoint),
    rdzvId,
    lastCallMs: lastCall === undefined ? kDefaultLastCallMs : parseDuration('--rdzv-last-call', lastCall, { allowZero: true }),
    timeoutMs: elasticTimeoutMs,
  };
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
