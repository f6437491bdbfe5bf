/**
 * The algorithms a user may force per collective (RINGREDUCE_ALGORITHMS, init's `algorithms`),
 * as NCCL_ALGO and MPICH's MPIR_CVAR_<COLL>_INTRA_ALGORITHM do. The names are the ones the
 * choosers in src/algorithms/ return, which take their types from here, so a new algorithm is
 * added once. `auto` is the engine's own choice (docs/algorithms.md); it lets an init option
 * undo a collective the environment forces.
 */
import { InvalidArgumentError } from './errors.js';

export const kForceableAlgorithms = {
  allreduce: ['recursive_doubling', 'ring', 'rabenseifner'],
  allgather: ['ring', 'bruck'],
  broadcast: ['tree', 'chain', 'scatter_allgather'],
  reducescatter: ['ring', 'recursive_halving'],
  reduce: ['tree', 'rabenseifner'],
} as const;

export type ForceableCollective = keyof typeof kForceableAlgorithms;
export const kForceableCollectives = Object.keys(kForceableAlgorithms) as ForceableCollective[];

/** The algorithms of `C`, without `auto`. */
export type AlgorithmOf<C extends ForceableCollective> = (typeof kForceableAlgorithms)[C][number];

/** What the setting holds: per collective an algorithm or `auto`; a collective left out is `auto`. */
export type AlgorithmsSetting = { [C in ForceableCollective]?: AlgorithmOf<C> | 'auto' };

/** The forced algorithms alone (`auto` dropped): what the choosers read. */
export type ForcedAlgorithms = { readonly [C in ForceableCollective]?: AlgorithmOf<C> };

/** "allreduce: recursive_doubling, ring, rabenseifner; allgather: ..." for error messages. */
export function describeForceable(): string {
  return kForceableCollectives.map((c) => `${c}: ${[...kForceableAlgorithms[c], 'auto'].join(', ')}`).join('; ');
}

/**
 * RINGREDUCE_ALGORITHMS: comma-separated `collective=algorithm` pairs, such as
 * `broadcast=scatter_allgather,allreduce=rabenseifner`. An unknown collective or algorithm, a pair
 * without `=`, or a collective named twice is refused, naming the variable and what is allowed.
 */
export function parseAlgorithms(text: string, name: string): AlgorithmsSetting {
  const out: Record<string, string> = {};
  const refuse = (why: string): never => {
    throw new InvalidArgumentError(
      `${name}: ${why}; it takes collective=algorithm pairs separated by commas, such as ` +
        `broadcast=scatter_allgather,allreduce=rabenseifner, from ${describeForceable()}; got ${JSON.stringify(text)}`,
    );
  };
  for (const part of text.split(',')) {
    const [collective = '', algorithm, ...rest] = part.split('=').map((x) => x.trim());
    if (algorithm === undefined || rest.length > 0) refuse(`${JSON.stringify(part.trim())} is not collective=algorithm`);
    if (!(kForceableCollectives as string[]).includes(collective)) refuse(`no collective ${JSON.stringify(collective)}`);
    const allowed: readonly string[] = [...kForceableAlgorithms[collective as ForceableCollective], 'auto'];
    if (!allowed.includes(algorithm as string)) refuse(`${collective} has no algorithm ${JSON.stringify(algorithm)}`);
    if (collective in out) refuse(`${collective} is named twice`);
    out[collective] = algorithm as string;
  }
  return out as AlgorithmsSetting;
}

/** The setting without its `auto` entries, frozen; undefined when it forces nothing. Start-up only. */
export function forcedAlgorithms(setting: AlgorithmsSetting | undefined): ForcedAlgorithms | undefined {
  if (setting === undefined) return undefined;
  const forced = Object.entries(setting).filter(([, algorithm]) => algorithm !== 'auto');
  return forced.length === 0 ? undefined : (Object.freeze(Object.fromEntries(forced)) as ForcedAlgorithms);
}
