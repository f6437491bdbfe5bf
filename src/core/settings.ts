/**
 * The tunable settings, one row each: the init() option, its environment variable, what each
 * accepts, and the default. config.ts builds init()'s schema and resolves every setting from this
 * table (option, else variable, else default); docs/env.md's tables are checked against it
 * (test/unit/config_settings.test.ts). The job's identity (rank, size, store, secret) is not
 * here: config.ts and launcher_sources.ts read it, because it comes from several sources at once.
 */
import { z } from 'zod';
import {
  type AlgorithmOf,
  type AlgorithmsSetting,
  describeForceable,
  type ForceableCollective,
  kForceableAlgorithms,
  parseAlgorithms,
} from './algorithm_names.js';
import { kEnv } from './env_names.js';
import { type Env, envChoice, envFlag, envInt, envText } from './env_values.js';
import { InvalidArgumentError } from './errors.js';
import { kLogLevels } from './log_levels.js';
import { kHierarchicalModes } from './types.js';

export const kBackends = ['tcp', 'mpi', 'auto', 'web'] as const;
export type Backend = (typeof kBackends)[number];
export const kReadyExchanges = ['auto', 'all-to-all', 'recursive-doubling'] as const;
export type ReadyExchange = (typeof kReadyExchanges)[number];

/** Given cost-model figures, in seconds. */
export interface CostFigures {
  alpha?: number;
  beta?: number;
  gamma?: number;
}
export type CostModelSetting = 'measure' | 'off' | Readonly<CostFigures>;

interface Setting<T, S extends z.ZodType<NonNullable<T>>> {
  /** Its environment variable (docs/env.md). */
  readonly env: string;
  /** What init() accepts for it. */
  readonly schema: S;
  /** Its value from the environment, undefined when unset; throws on a malformed one. */
  readonly read: (env: Env, name: string) => T | undefined;
  /** The value when neither the option nor the variable sets it. */
  readonly fallback: NoInfer<T>;
  /**
   * Every rank of a job must have the same value: it decides what goes on the wire or which
   * algorithm runs, so ranks that differ hang or compute wrongly. The ranks compare these at
   * start-up and fail init() naming any that differ (engine/settings_agreement.ts); ringrun
   * forwards them to browser ranks (launcher/env_contract.ts). Settings a rank's connections
   * depend on (backend, tls) fail earlier, when the ranks connect, and are not marked.
   */
  readonly agree?: true;
}

function setting<T, S extends z.ZodType<NonNullable<T>>>(row: Setting<T, S>): Setting<T, S> {
  return row;
}

const atLeast = (min: number) => (env: Env, name: string) => envInt(env, name, min);
const oneOf =
  <T extends string>(values: readonly T[], aliases?: Readonly<Record<string, T>>) =>
  (env: Env, name: string) =>
    envChoice(env, name, values, aliases);
const positive = () => z.number().int().positive();
const nonNegative = () => z.number().int().nonnegative();
/** A text setting that is unset by default. */
const optionalText = (env: string) =>
  setting<string | undefined, z.ZodString>({ env, schema: z.string().min(1), read: envText, fallback: undefined });
/** RINGREDUCE_COST_MODEL: `measure`, `off`, or figures such as `alpha=20e-6,beta=0.1e-9`. */
function readCostModel(env: Env, name: string): CostModelSetting | undefined {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  if (text === 'measure' || text === 'off') return text;
  const figures: CostFigures = {};
  for (const part of text.split(',')) {
    const [figure, value, ...rest] = part.split('=').map((x) => x.trim());
    const seconds = Number(value);
    if (
      (figure !== 'alpha' && figure !== 'beta' && figure !== 'gamma') ||
      rest.length > 0 ||
      value === '' ||
      !(Number.isFinite(seconds) && seconds >= 0)
    ) {
      throw new InvalidArgumentError(
        `${name} must be measure, off, or figures in seconds such as alpha=20e-6,beta=0.1e-9,gamma=0.3e-9; got ${JSON.stringify(text)}`,
      );
    }
    figures[figure] = seconds;
  }
  return figures;
}
const kCostFiguresSchema = z.strictObject({
  alpha: z.number().nonnegative().optional(),
  beta: z.number().nonnegative().optional(),
  gamma: z.number().nonnegative().optional(),
});

/** RINGREDUCE_ALGORITHMS: `collective=algorithm` pairs (algorithm_names.ts). */
function readAlgorithms(env: Env, name: string): AlgorithmsSetting | undefined {
  const text = env[name];
  return text === undefined || text.trim() === '' ? undefined : parseAlgorithms(text, name);
}
/** One collective's field of init's `algorithms`: its algorithms or `auto`, refused with what is allowed. */
function algorithmChoice<C extends ForceableCollective>(
  collective: C,
): z.ZodOptional<z.ZodType<AlgorithmOf<C> | 'auto', AlgorithmOf<C> | 'auto'>> {
  const allowed = [...kForceableAlgorithms[collective], 'auto'] as string[] as [string, ...string[]];
  const error = (issue: { input?: unknown }) =>
    `${collective} has no algorithm ${JSON.stringify(issue.input)} (${kEnv.algorithms}): one of ${allowed.join(', ')}`;
  return z.enum(allowed, { error }).optional() as unknown as z.ZodOptional<
    z.ZodType<AlgorithmOf<C> | 'auto', AlgorithmOf<C> | 'auto'>
  >;
}
/** init's `algorithms`: an object of the same pairs; an unknown collective is refused with the list. */
const kAlgorithmsSchema = z.strictObject(
  {
    allreduce: algorithmChoice('allreduce'),
    allgather: algorithmChoice('allgather'),
    broadcast: algorithmChoice('broadcast'),
    reducescatter: algorithmChoice('reducescatter'),
    reduce: algorithmChoice('reduce'),
  } satisfies Record<ForceableCollective, unknown>,
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `no collective ${issue.keys.map((k) => JSON.stringify(k)).join(', ')} (${kEnv.algorithms}): ${describeForceable()}`
        : undefined,
  },
);

/** Horovod's spelling of on and off. */
const kOnOff = { '1': 'on', '0': 'off' } as const;

export const kSettings = {
  startTimeoutMs: setting({ env: kEnv.startTimeoutMs, schema: positive(), read: atLeast(1), fallback: 30_000 }),
  ioTimeoutMs: setting({ env: kEnv.ioTimeoutMs, schema: positive(), read: atLeast(1), fallback: 30_000 }),
  stallTimeoutMs: setting({ env: kEnv.stallTimeoutMs, schema: nonNegative(), read: atLeast(0), fallback: 60_000 }),
  stallWarningMs: setting({ env: kEnv.stallWarningMs, schema: nonNegative(), read: atLeast(0), fallback: 30_000 }),
  heartbeatMs: setting({ env: kEnv.heartbeatMs, schema: nonNegative(), read: atLeast(0), fallback: 2_000 }),
  networkInterface: optionalText(kEnv.networkInterface),
  address: optionalText(kEnv.address),
  logLevel: setting({ env: kEnv.logLevel, schema: z.enum(kLogLevels), read: oneOf(kLogLevels), fallback: 'warn' }),
  backend: setting({ env: kEnv.backend, schema: z.enum(kBackends), read: oneOf(kBackends), fallback: 'auto' }),
  // 16 MiB, not Horovod's 64: packing costs two copies, and past 16 MiB the copies (and MPI's
  // own large-message path) cost more than the per-collective latency fusion saves (docs/performance.md).
  // Agreed: a ready round fuses on every rank by its own threshold (ready_path.ts), without rank 0.
  fusionThresholdBytes: setting({
    env: kEnv.fusionThresholdBytes,
    schema: nonNegative(),
    read: atLeast(0),
    fallback: 16 * 1024 * 1024,
    agree: true,
  }),
  // Agreed: every rank's cache must hold the same names at the same bits of the ready rounds' vectors.
  cacheCapacity: setting({ env: kEnv.cacheCapacity, schema: nonNegative(), read: atLeast(0), fallback: 1024, agree: true }),
  // 4 MiB: fewer, larger messages win here (docs/performance.md has the figures against 256 KiB).
  segmentBytes: setting({
    env: kEnv.segmentBytes,
    schema: positive(),
    read: atLeast(1),
    fallback: 4 * 1024 * 1024,
    agree: true,
  }),
  hierarchicalAllreduce: setting({
    env: kEnv.hierarchicalAllreduce,
    schema: z.enum(kHierarchicalModes),
    read: oneOf(kHierarchicalModes, kOnOff),
    fallback: 'auto',
    agree: true,
  }),
  hierarchicalAllgather: setting({
    env: kEnv.hierarchicalAllgather,
    schema: z.enum(kHierarchicalModes),
    read: oneOf(kHierarchicalModes, kOnOff),
    fallback: 'auto',
    agree: true,
  }),
  // A burst of 100 calls takes about 1 ms here. Only bursts are held (a lone call never is), so
  // the hold delays just calls that a long computation follows within the same tick.
  burstHoldMs: setting({ env: kEnv.burstHoldMs, schema: nonNegative(), read: atLeast(0), fallback: 2 }),
  unixSockets: setting({ env: kEnv.unixSockets, schema: z.boolean(), read: envFlag, fallback: true }),
  engineThread: setting({ env: kEnv.engineThread, schema: z.boolean(), read: envFlag, fallback: true }),
  sharedMemory: setting({ env: kEnv.sharedMemory, schema: z.boolean(), read: envFlag, fallback: true }),
  tls: setting({ env: kEnv.tls, schema: z.boolean(), read: envFlag, fallback: false }),
  timeline: optionalText(kEnv.timeline),
  readyExchange: setting({
    env: kEnv.readyExchange,
    schema: z.enum(kReadyExchanges),
    read: oneOf(kReadyExchanges),
    fallback: 'auto',
    agree: true,
  }),
  costModel: setting<CostModelSetting, z.ZodUnion<[z.ZodEnum<{ measure: 'measure'; off: 'off' }>, typeof kCostFiguresSchema]>>({
    env: kEnv.costModel,
    schema: z.union([z.enum(['measure', 'off']), kCostFiguresSchema]),
    read: readCostModel,
    fallback: 'measure',
    // Agreed: the figures choose algorithms, and `measure` makes every rank join rank 0's probe.
    agree: true,
  }),
  // Unset: every collective chooses its algorithm itself (docs/algorithms.md).
  algorithms: setting<AlgorithmsSetting | undefined, typeof kAlgorithmsSchema>({
    env: kEnv.algorithms,
    schema: kAlgorithmsSchema,
    read: readAlgorithms,
    fallback: undefined,
    agree: true,
  }),
  // Agreed: an autotuning rank starts at the grid's largest fusion threshold and follows rank 0's trials.
  autotune: setting({ env: kEnv.autotune, schema: z.boolean(), read: envFlag, fallback: false, agree: true }),
  autotuneLog: optionalText(kEnv.autotuneLog),
} as const;

type Settings = typeof kSettings;
export type SettingName = keyof Settings;
/** Each setting's resolved value. */
export type SettingValues = {
  readonly [K in SettingName]: Settings[K] extends { read: (env: Env, name: string) => infer T | undefined } ? T : never;
};

/** init()'s fields for the settings: each optional, as its row's schema accepts it. */
export function settingsSchemaShape(): { [K in SettingName]: z.ZodOptional<Settings[K]['schema']> } {
  return Object.fromEntries(Object.entries(kSettings).map(([name, row]) => [name, row.schema.optional()])) as {
    [K in SettingName]: z.ZodOptional<Settings[K]['schema']>;
  };
}

/** Every setting: the option when given, else its variable, else its default. */
export function resolveSettings(options: { readonly [K in SettingName]?: unknown }, env: Env): SettingValues {
  const values: Record<string, unknown> = {};
  for (const [name, row] of Object.entries(kSettings) as [SettingName, Settings[SettingName]][]) {
    const value = options[name] ?? row.read(env, row.env) ?? row.fallback;
    // The config is frozen through: an object setting (the cost model's figures) is copied and frozen.
    values[name] = typeof value === 'object' && value !== null ? Object.freeze({ ...value }) : value;
  }
  return values as SettingValues;
}
