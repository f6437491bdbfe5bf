/**
 * The one place that reads the environment. `resolveConfig` merges init() options (which win)
 * with the environment contract of docs/env.md into one frozen Config that the runtime and the
 * engine share; nothing else looks at process.env.
 *
 * Rank and size come from the first source that sets them: RINGREDUCE_*, Open MPI
 * (OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE, ...), Slurm (SLURM_PROCID, ...), then PMI.
 * Without any, the process is a job of size 1; so is one with RINGREDUCE_SIZE=1 alone, whatever
 * else is set. A source other than RINGREDUCE_* is recorded (Config.jobSource), so that a
 * process that joined a job because of variables left in its environment says so.
 */
import { z } from 'zod';
import { kEnv } from './env_names.js';
import { InvalidArgumentError } from './errors.js';
import { type JobSource, joinedBecause } from './job_source.js';
import { isLogLevel, kLogLevels, type LogLevel } from './log_levels.js';
import { type HierarchicalMode, kHierarchicalModes } from './types.js';

/** Re-exported for src/launcher/check_build.ts, which still imports it from here (core/version.ts is its home). */
export { kVersion } from './version.js';

/**
 * The settings a rank runs with, resolved at init from the options, the environment
 * (docs/env.md) and the defaults: a RingReduce instance's `config` (read only). Durations are in
 * milliseconds, sizes in bytes. An elastic job's changes with each generation (ranks are renumbered).
 */
export interface Config {
  readonly rank: number;
  readonly size: number;
  readonly localRank: number;
  readonly localSize: number;
  readonly crossRank: number;
  readonly crossSize: number;
  /** Where rank 0 hosts the rendezvous store and the others find it. */
  readonly storeHost: string;
  readonly storePort: number;
  /**
   * ws:// or wss:// URL of the launcher's store bridge (web backend): how a browser rank, which
   * cannot open TCP, reaches the store. A Node rank uses it only when no store address is given.
   */
  readonly storeUrl: string | undefined;
  /** The address this rank binds its data listener to and advertises to its peers (unset: chosen by the transport). */
  readonly address: string | undefined;
  readonly jobId: string;
  readonly startTimeoutMs: number;
  readonly ioTimeoutMs: number;
  readonly stallTimeoutMs: number;
  /** Rank 0 logs which ranks have not submitted which tensors once a name has waited this long; 0: never. */
  readonly stallWarningMs: number;
  /** Ping interval while collectives are pending (a silent peer fails after ioTimeoutMs); 0: no pings. */
  readonly heartbeatMs: number;
  /** Bind to and advertise this network interface's address (e.g. "eth0"); wins over `address`. */
  readonly networkInterface: string | undefined;
  /**
   * The job secret every connection proves it knows (RINGREDUCE_SECRET, made by ringrun).
   * Never log it, never send it. Unset: connections are not authenticated (a warning says so).
   */
  readonly secret: string | undefined;
  readonly logLevel: LogLevel;
  /** Whether an MPI launcher started this process (Open MPI or PMI variables are set). */
  readonly underMpi: boolean;
  /**
   * 'tcp' (default), 'mpi' (the native addon), 'auto' (mpi when started by mpirun and the addon
   * loads), or 'web' (WebSockets and data channels, for jobs with browser ranks; never chosen by 'auto').
   */
  readonly backend: Backend;
  /** Performance settings (docs/performance.md); owned by the engine. */
  /** Allreduces ready together are packed into one buffer up to this many bytes; 0 disables fusion. */
  readonly fusionThresholdBytes: number;
  /** Negotiation responses remembered per rank (the response cache); 0 disables the cache. */
  readonly cacheCapacity: number;
  /** Bytes per message of the pipelined ring and chain algorithms (the same on every rank). */
  readonly segmentBytes: number;
  /**
   * Allreduce across hosts as reduce-scatter within each host, allreduce across hosts, allgather
   * within each host (algorithms/hierarchical_allreduce.ts): 'auto' (default) for sizes past the
   * latency path, 'on' at every size, 'off' never. Only where every host has the same number (> 1)
   * of consecutive ranks and there are several hosts; the same on every rank.
   */
  readonly hierarchicalAllreduce: HierarchicalMode;
  /** The same for allgather (algorithms/hierarchical_allgather.ts): 'auto' and 'on' alike run it wherever the layout allows. */
  readonly hierarchicalAllgather: HierarchicalMode;
  /**
   * How long the engine may hold its report of a call while the caller is still making more
   * calls in the same synchronous burst (so the burst runs fused); 0: report at once.
   */
  readonly burstHoldMs: number;
  /** TCP backend: ranks on the same host talk over Unix domain sockets (faster than loopback TCP). */
  readonly unixSockets: boolean;
  /** TCP backend: large messages between ranks of one host go through files in /dev/shm (shm_lane.ts). */
  readonly sharedMemory: boolean;
  /** TCP backend: TLS keyed from the job secret on every TCP link and store connection (rendezvous/tls_links.ts). */
  readonly tls: boolean;
  /** Chrome trace file of the engine's phases (rank r > 0 of a larger job: see timelinePathFor), or undefined. */
  readonly timeline: string | undefined;
  /**
   * How ready rounds exchange their bit-vectors (engine/ready/ready_exchange_mode.ts): 'all-to-all',
   * 'recursive-doubling', or 'auto' (by set size). Must be the same on every rank.
   */
  readonly readyExchange: ReadyExchange;
  /**
   * The α, β and γ (seconds per message, per byte sent, per byte reduced) of the choices made by
   * cost from 8 ranks on (algorithms/cost_model.ts): 'measure' (α and β measured at start-up,
   * engine/cost_probe.ts), 'off' (the built-in figures), or given figures (unset ones built in).
   */
  readonly costModel: CostModelSetting;
  /** Process sets defined from the start (ids 1, 2, ... in this order): ranks of the job, the same on every rank. */
  readonly processSets: readonly (readonly number[])[];
  /** The launcher variables rank and size came from, when not from RINGREDUCE_* or options (said at init). */
  readonly jobSource: JobSource | undefined;
  /**
   * Elastic mode (ringrun --elastic): this process's worker id. Rank and size then come from the
   * generation the launcher publishes in its store (rendezvous/generations.ts), not from the
   * environment, and no rank hosts the store.
   */
  readonly elasticWorker: string | undefined;
  /** ringrun --dashboard: the URL this rank reports its state to (observability/dashboard_target.ts). */
  readonly dashboard: string | undefined;
}

export type Backend = 'tcp' | 'mpi' | 'auto' | 'web';
export const kReadyExchanges = ['auto', 'all-to-all', 'recursive-doubling'] as const;
export type ReadyExchange = (typeof kReadyExchanges)[number];
const kBackends: readonly Backend[] = ['tcp', 'mpi', 'auto', 'web'];
/** Given cost-model figures, in seconds. */
export interface CostFigures {
  alpha?: number;
  beta?: number;
  gamma?: number;
}
export type CostModelSetting = 'measure' | 'off' | Readonly<CostFigures>;

const rankField = z.number().int().nonnegative();
const timeoutField = z.number().int().nonnegative();

const kOptionsSchema = z.strictObject({
  rank: rankField.optional(),
  size: z.number().int().positive().optional(),
  localRank: rankField.optional(),
  localSize: z.number().int().positive().optional(),
  crossRank: rankField.optional(),
  crossSize: z.number().int().positive().optional(),
  storeAddress: z.string().min(1).optional(),
  storeUrl: z
    .string()
    .regex(/^wss?:\/\/[^\s]+$/, 'must be a ws:// or wss:// URL')
    .optional(),
  address: z.string().min(1).optional(),
  jobId: z.string().min(1).max(128).optional(),
  startTimeoutMs: z.number().int().positive().optional(),
  ioTimeoutMs: z.number().int().positive().optional(),
  stallTimeoutMs: timeoutField.optional(),
  stallWarningMs: timeoutField.optional(),
  heartbeatMs: timeoutField.optional(),
  networkInterface: z.string().min(1).optional(),
  secret: z.string().min(1).optional(),
  logLevel: z.enum(kLogLevels).optional(),
  backend: z.enum(['tcp', 'mpi', 'auto', 'web']).optional(),
  fusionThresholdBytes: z.number().int().nonnegative().optional(),
  cacheCapacity: z.number().int().nonnegative().optional(),
  segmentBytes: z.number().int().positive().optional(),
  hierarchicalAllreduce: z.enum(kHierarchicalModes).optional(),
  hierarchicalAllgather: z.enum(kHierarchicalModes).optional(),
  burstHoldMs: timeoutField.optional(),
  unixSockets: z.boolean().optional(),
  sharedMemory: z.boolean().optional(),
  tls: z.boolean().optional(),
  timeline: z.string().min(1).optional(),
  readyExchange: z.enum(kReadyExchanges).optional(),
  costModel: z
    .union([
      z.enum(['measure', 'off']),
      z.strictObject({
        alpha: z.number().nonnegative().optional(),
        beta: z.number().nonnegative().optional(),
        gamma: z.number().nonnegative().optional(),
      }),
    ])
    .optional(),
  processSets: z.array(z.array(rankField).min(1)).optional(),
});

/**
 * Options of `init()`. Each wins over its environment variable (docs/env.md); every one is
 * optional, and an unknown one is refused by name.
 * @example
 * await rr.init({ startTimeoutMs: 120_000, logLevel: 'info' });
 */
export interface InitOptions {
  /** This process's rank, `0 … size-1` (`RINGREDUCE_RANK`); with `size`, starts a rank without a launcher. */
  rank?: number;
  /** The number of ranks in the job (`RINGREDUCE_SIZE`); `init({ size: 1 })` runs this process alone. */
  size?: number;
  /** This rank among the ranks on its host (`RINGREDUCE_LOCAL_RANK`). */
  localRank?: number;
  /** The number of ranks on this host (`RINGREDUCE_LOCAL_SIZE`). */
  localSize?: number;
  /** The index of this host among the job's hosts (`RINGREDUCE_CROSS_RANK`). */
  crossRank?: number;
  /** The number of hosts in the job (`RINGREDUCE_CROSS_SIZE`). */
  crossSize?: number;
  /** `host:port` of the rendezvous store: rank 0 hosts it there, the others connect (`RINGREDUCE_STORE_ADDR`; IPv6 as `[::1]:port`). */
  storeAddress?: string;
  /** `ws://` or `wss://` URL of the launcher's store bridge, how a browser rank reaches the store (`RINGREDUCE_STORE_URL`). */
  storeUrl?: string;
  /** The address this rank binds its data listener to and advertises to its peers (`RINGREDUCE_ADDRESS`). */
  address?: string;
  /** The job's id (1-128 characters), checked by every handshake so two jobs never connect (`RINGREDUCE_JOB_ID`). */
  jobId?: string;
  /** Deadline in ms for rendezvous and connecting every rank at `init()` (`RINGREDUCE_START_TIMEOUT_MS`, default 30000). */
  startTimeoutMs?: number;
  /** A network read or write that makes no progress this long (ms) fails that peer (`RINGREDUCE_IO_TIMEOUT_MS`, default 30000). */
  ioTimeoutMs?: number;
  /** Rank 0 fails a collective some ranks submitted and others did not within this time (ms); 0: never (`RINGREDUCE_STALL_TIMEOUT_MS`, default 60000). */
  stallTimeoutMs?: number;
  /** Rank 0 warns, naming the missing ranks, once a collective has waited this long (ms); 0: never (`RINGREDUCE_STALL_WARNING_MS`, default 30000). */
  stallWarningMs?: number;
  /** Interval (ms) of the pings that find a silent peer while collectives are pending; 0: none (`RINGREDUCE_HEARTBEAT_MS`, default 2000). */
  heartbeatMs?: number;
  /** Bind to and advertise this network interface's first IPv4 address (`'eth0'`); wins over `address` (`RINGREDUCE_NETWORK_INTERFACE`). */
  networkInterface?: string;
  /** The job secret every connection proves it knows (`RINGREDUCE_SECRET`, made by ringrun). Unset: connections are not authenticated. */
  secret?: string;
  /** `'error'`, `'warn'` (default), `'info'` or `'debug'` (`RINGREDUCE_LOG_LEVEL`). */
  logLevel?: LogLevel;
  /** `'tcp'`, `'mpi'` (the native addon), `'auto'` (default: mpi under mpirun when the addon loads) or `'web'` (jobs with browser ranks) (`RINGREDUCE_BACKEND`). */
  backend?: Backend;
  /** Allreduces ready together are packed into one buffer up to this many bytes; 0: no fusion (`RINGREDUCE_FUSION_THRESHOLD_BYTES`, default 16 MiB). */
  fusionThresholdBytes?: number;
  /** Tensor names the response cache remembers; 0: every collective negotiates through rank 0 (`RINGREDUCE_CACHE_CAPACITY`, default 1024). */
  cacheCapacity?: number;
  /** Bytes per message of the pipelined ring and chain algorithms; the same on every rank (`RINGREDUCE_SEGMENT_BYTES`, default 4 MiB). */
  segmentBytes?: number;
  /** Hierarchical allreduce across hosts: `'auto'` (default), `'on'` or `'off'`; the same on every rank (`RINGREDUCE_HIERARCHICAL_ALLREDUCE`). */
  hierarchicalAllreduce?: HierarchicalMode;
  /** Hierarchical allgather across hosts: `'auto'` (default), `'on'` or `'off'` (`RINGREDUCE_HIERARCHICAL_ALLGATHER`). */
  hierarchicalAllgather?: HierarchicalMode;
  /** How long (ms) the engine may hold a synchronous burst of calls so that it runs fused; 0: at once (`RINGREDUCE_BURST_HOLD_MS`, default 2). */
  burstHoldMs?: number;
  /** TCP backend: ranks on one host talk over Unix domain sockets (default `true`; `RINGREDUCE_UNIX_SOCKETS`). */
  unixSockets?: boolean;
  /** TCP backend: large messages between ranks on one host go through `/dev/shm` (default `true`; `RINGREDUCE_SHARED_MEMORY`). */
  sharedMemory?: boolean;
  /** TCP backend: encrypt every TCP link between ranks and to the store with TLS keyed from the job secret, which it requires (default `false`; `RINGREDUCE_TLS`). */
  tls?: boolean;
  /** Write a Chrome trace (Perfetto) of each collective's phases to this file (`RINGREDUCE_TIMELINE`). */
  timeline?: string;
  /** How ready rounds exchange their bit-vectors: `'auto'` (default), `'all-to-all'` or `'recursive-doubling'`; the same on every rank (`RINGREDUCE_READY_EXCHANGE`). */
  readyExchange?: ReadyExchange;
  /** α, β and γ of the choices by cost from 8 ranks on: `'measure'` (default: α and β measured at start-up), `'off'` (built-in figures) or `{ alpha, beta, gamma }` in seconds, unset ones built in; the same on every rank (`RINGREDUCE_COST_MODEL`). */
  costModel?: 'measure' | 'off' | CostFigures;
  /** Process sets defined from the start, ids 1, 2, … in this order: ranks of the job, the same on every rank. */
  processSets?: number[][];
}

/** `true` only when A and B are the same type (not merely assignable either way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/**
 * Compile-time check that InitOptions (written out, for its docs) and the schema (which parses
 * the options) declare the same fields with the same types: a field added, renamed or retyped
 * in one and not the other fails `tsc` here.
 */
const kInitOptionsMatchSchema: Same<InitOptions, z.input<typeof kOptionsSchema>> = true;
void kInitOptionsMatchSchema;

/** The names of init()'s options, in the schema's order (docs/env.md lists them all). */
export const kInitOptionNames: readonly string[] = Object.freeze(Object.keys(kOptionsSchema.shape));

type Env = Readonly<Record<string, string | undefined>>;

function envInt(env: Env, name: string, min = 0): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(`environment variable ${name}=${JSON.stringify(raw)} must be an integer >= ${min}`);
  }
  return value;
}

interface EnvPlacement {
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
function placementFromEnv(env: Env): EnvPlacement | undefined {
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
 * Slurm's node-level values. SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; the
 * tasks of each node are in SLURM_STEP_TASKS_PER_NODE (srun) or SLURM_TASKS_PER_NODE, as
 * "2(x3),1" (2 tasks on each of 3 nodes, then 1), indexed by SLURM_NODEID.
 */
function slurmPlacement(env: Env): Pick<EnvPlacement, 'localSize' | 'crossRank' | 'crossSize'> {
  const nodeId = envInt(env, 'SLURM_NODEID');
  const perNodeText = env.SLURM_STEP_TASKS_PER_NODE || env.SLURM_TASKS_PER_NODE;
  const perNode = perNodeText ? parseSlurmTasksPerNode(perNodeText) : undefined;
  const fromList = nodeId !== undefined ? perNode?.[nodeId] : undefined;
  return {
    localSize: envInt(env, 'SLURM_NTASKS_PER_NODE', 1) ?? fromList,
    crossRank: nodeId,
    crossSize: envInt(env, 'SLURM_STEP_NUM_NODES', 1) ?? envInt(env, 'SLURM_NNODES', 1) ?? perNode?.length,
  };
}

/** Slurm's tasks-per-node form, "2(x3),1", expanded: [2, 2, 2, 1]. */
export function parseSlurmTasksPerNode(text: string): number[] {
  const counts: number[] = [];
  for (const item of text.split(',')) {
    const match = /^\s*(\d+)(?:\(x(\d+)\))?\s*$/.exec(item);
    if (match === null) {
      throw new InvalidArgumentError(`Slurm tasks per node ${JSON.stringify(text)}: expected a form like "2(x3),1"`);
    }
    const repeat = Number(match[2] ?? 1);
    if (repeat > 1_000_000) throw new InvalidArgumentError(`Slurm tasks per node ${JSON.stringify(text)}: too many nodes`);
    for (let i = 0; i < repeat; i++) counts.push(Number(match[1]));
  }
  return counts;
}

/**
 * Slurm's compressed host list, expanded in order: "node[01-03,07],gpu[1-2]-ib" gives node01,
 * node02, node03, node07, gpu1-ib, gpu2-ib. Ranges keep their zero padding; several bracket
 * groups in one name multiply out. Throws InvalidArgumentError on a malformed list.
 */
export function expandSlurmHostlist(text: string): string[] {
  const hosts: string[] = [];
  for (const item of splitTopLevel(text)) {
    let names = [''];
    const pattern = /([^[]*)(?:\[([^\]]*)\])?/gy;
    let consumed = 0;
    for (let match = pattern.exec(item); match !== null && match[0] !== ''; match = pattern.exec(item)) {
      consumed = pattern.lastIndex;
      const prefix = match[1] ?? '';
      const choices = match[2] === undefined ? [''] : expandRanges(match[2], text);
      names = names.flatMap((name) => choices.map((choice) => `${name}${prefix}${choice}`));
      if (names.length > 1_000_000) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is too long`);
    }
    if (consumed !== item.length) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is malformed`);
    hosts.push(...names.filter((name) => name !== ''));
  }
  return hosts;
}

/** Splits on the commas outside brackets. */
function splitTopLevel(text: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '[') depth++;
    else if (c === ']') depth--;
    else if (c === ',' && depth === 0) {
      items.push(text.slice(start, i));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is malformed`);
  }
  if (depth !== 0) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} has an unclosed bracket`);
  items.push(text.slice(start));
  return items.map((item) => item.trim()).filter((item) => item !== '');
}

/** "01-03,07" → 01, 02, 03, 07 (the padding of the range's start is kept). */
function expandRanges(ranges: string, text: string): string[] {
  return ranges.split(',').flatMap((range) => {
    const match = /^(\d+)(?:-(\d+))?$/.exec(range.trim());
    if (match === null) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)}: bad range "${range}"`);
    const [, lowText = '', highText] = match;
    const low = Number(lowText);
    const high = highText === undefined ? low : Number(highText);
    if (high < low || high - low > 1_000_000) {
      throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)}: bad range "${range}"`);
    }
    return Array.from({ length: high - low + 1 }, (_, i) => String(low + i).padStart(lowText.length, '0'));
  });
}

/** Below Linux's ephemeral ports (32768+), as ringrun's own choice for a remote store. */
const kSlurmPortRange = [20_000, 32_000] as const;

/**
 * Where a job started by Slurm meets: the first node of the step (SLURM_STEP_NODELIST, else
 * SLURM_JOB_NODELIST or SLURM_NODELIST), where task 0 runs, and a port derived from the job
 * and step ids (two jobs, or two steps running at once, sharing a node get different ports);
 * MASTER_PORT wins when set. Undefined outside Slurm. Also the default endpoint of
 * `ringrun --slurm`.
 */
export function slurmRendezvous(env: Env): { host: string; port: number } | undefined {
  const list = env.SLURM_STEP_NODELIST || env.SLURM_JOB_NODELIST || env.SLURM_NODELIST;
  if (!list) return undefined;
  const host = expandSlurmHostlist(list)[0];
  if (host === undefined) return undefined;
  const given = envInt(env, 'MASTER_PORT', 1);
  if (given !== undefined) return { host, port: given };
  const job = envInt(env, 'SLURM_JOB_ID') ?? envInt(env, 'SLURM_JOBID') ?? 0;
  const step = envInt(env, 'SLURM_STEP_ID') ?? envInt(env, 'SLURM_STEPID') ?? 0;
  const [low, high] = kSlurmPortRange;
  // A step id may be 0xfffffffe (the batch step): keep the arithmetic in safe integers.
  return { host, port: low + ((job * 31 + (step % 1000)) % (high - low)) };
}

/** auto, on or off; Horovod's 1 and 0 mean on and off. */
/** `1` or `0` (empty: unset); anything else is refused by name. */
function envFlag(env: Env, name: string): boolean | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (raw !== '1' && raw !== '0') throw new InvalidArgumentError(`${name} must be 1 or 0, got ${JSON.stringify(raw)}`);
  return raw === '1';
}

/** RINGREDUCE_COST_MODEL: `measure` (default), `off`, or figures such as `alpha=20e-6,beta=0.1e-9`. */
function envCostModel(env: Env): CostModelSetting {
  const text = env[kEnv.costModel] || 'measure';
  if (text === 'measure' || text === 'off') return text;
  const figures: CostFigures = {};
  for (const part of text.split(',')) {
    const [name, value, ...rest] = part.split('=').map((x) => x.trim());
    const seconds = Number(value);
    if (
      (name !== 'alpha' && name !== 'beta' && name !== 'gamma') ||
      rest.length > 0 ||
      value === '' ||
      !(Number.isFinite(seconds) && seconds >= 0)
    ) {
      throw new InvalidArgumentError(
        `${kEnv.costModel} must be measure, off, or figures in seconds such as alpha=20e-6,beta=0.1e-9,gamma=0.3e-9; got ${JSON.stringify(text)}`,
      );
    }
    figures[name] = seconds;
  }
  return Object.freeze(figures);
}

function envMode(env: Env, name: string): HierarchicalMode | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = raw === '1' ? 'on' : raw === '0' ? 'off' : raw;
  if (!(kHierarchicalModes as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`${name} must be auto, on or off (or 1, 0), got ${JSON.stringify(raw)}`);
  }
  return value as HierarchicalMode;
}

function parseHostPort(text: string, what: string): { host: string; port: number } {
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(text);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match?.[1] || !(port >= 0 && port <= 65535)) {
    throw new InvalidArgumentError(`${what} must be host:port, got ${JSON.stringify(text)}`);
  }
  return { host: match[1], port };
}

/**
 * RINGREDUCE_STORE_ADDR; else MASTER_ADDR:MASTER_PORT, or the port next to it when torchrun's
 * agent hosts its own store there (TORCHELASTIC_USE_AGENT_STORE=True: rank 0 cannot bind that
 * port, and every rank derives the same neighbour); else, under Slurm, the step's first node.
 */
function storeAddressFromEnv(env: Env, placement: EnvPlacement | undefined): string | undefined {
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

function formatHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * Every set: ranks of the job, none twice; as Horovod (and addProcessSet), not every rank of the
 * job (the global set), and no two sets of the same ranks in any order (a duplicate process set).
 */
function checkProcessSets(sets: readonly number[][], size: number): readonly (readonly number[])[] {
  const seen = new Map<string, number>();
  for (const [i, ranks] of sets.entries()) {
    const bad = ranks.find((r) => r >= size);
    if (bad !== undefined)
      throw new InvalidArgumentError(`init option 'processSets[${i}]' has rank ${bad}, not in a job of ${size}`);
    if (new Set(ranks).size !== ranks.length) {
      throw new InvalidArgumentError(`init option 'processSets[${i}]' names a rank twice: [${ranks.join(', ')}]`);
    }
    if (ranks.length === size) {
      throw new InvalidArgumentError(
        `init option 'processSets[${i}]' is every rank of the job, [${ranks.join(', ')}]: collectives without option 'processSet' run on all of them (Horovod refuses such a set as a duplicate of its global set)`,
      );
    }
    const key = [...ranks].sort((a, b) => a - b).join(',');
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      throw new InvalidArgumentError(
        `init option 'processSets[${i}]' has the ranks of 'processSets[${earlier}]' ([${ranks.join(', ')}], in any order): a duplicate process set, refused as Horovod does`,
      );
    }
    seen.set(key, i);
  }
  return Object.freeze(sets.map((ranks) => Object.freeze([...ranks])));
}

/** `bytes` random bytes in hex (the Web Crypto API: Node and browsers alike). */
function randomHex(bytes: number): string {
  const random = globalThis.crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(random, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function resolveConfig(options: InitOptions = {}, env: Env = process.env): Config {
  const parsed = kOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `init option '${issue.path.join('.')}'` : 'init options';
    throw new InvalidArgumentError(`${where}: ${issue?.message ?? 'invalid'}`);
  }
  const o = parsed.data;
  const fromEnv = placementFromEnv(env);
  const size = o.size ?? fromEnv?.size ?? 1;
  // The environment's rank and local values describe its job: only when that is the job of the options.
  const ofJob = o.size === undefined || o.size === fromEnv?.size ? fromEnv : undefined;
  const rank = o.rank ?? ofJob?.rank ?? 0;
  if (rank >= size) throw new InvalidArgumentError(`rank ${rank} is out of range for a job of size ${size}`);
  const localSize = o.localSize ?? ofJob?.localSize ?? size;
  const localRank = o.localRank ?? ofJob?.localRank ?? rank;
  const crossSize = o.crossSize ?? ofJob?.crossSize ?? 1;
  const crossRank = o.crossRank ?? ofJob?.crossRank ?? 0;
  const jobSource = o.size === undefined && o.rank === undefined && size > 1 ? fromEnv?.source : undefined;

  const storeText = o.storeAddress ?? storeAddressFromEnv(env, ofJob);
  const backend = o.backend ?? env[kEnv.backend] ?? 'auto';
  if (!kBackends.includes(backend as Backend)) {
    throw new InvalidArgumentError(`RINGREDUCE_BACKEND must be tcp, mpi, auto or web, got ${JSON.stringify(backend)}`);
  }
  const storeUrl = o.storeUrl ?? (env[kEnv.storeUrl] || undefined);
  if (storeUrl !== undefined && !/^wss?:\/\/\S+$/.test(storeUrl)) {
    throw new InvalidArgumentError(`${kEnv.storeUrl} must be a ws:// or wss:// URL, got ${JSON.stringify(storeUrl)}`);
  }
  const underMpi = env.OMPI_COMM_WORLD_SIZE !== undefined || env.PMI_SIZE !== undefined;
  // The MPI backend needs no store: only a TCP or web job must know where the store is.
  const mayUseMpi = backend === 'mpi' || (backend === 'auto' && underMpi);
  if (size > 1 && storeText === undefined && storeUrl === undefined && !mayUseMpi) {
    const why = jobSource === undefined ? '' : ` (${joinedBecause(jobSource, rank, size)})`;
    throw new InvalidArgumentError(
      `a job of size ${size} needs the rendezvous address: set RINGREDUCE_STORE_ADDR (or MASTER_ADDR and MASTER_PORT; a browser rank RINGREDUCE_STORE_URL), or start the job with ringrun${why}`,
    );
  }
  const store = storeText === undefined ? { host: '127.0.0.1', port: 0 } : parseHostPort(storeText, 'store address');
  const readyExchange = o.readyExchange ?? (env[kEnv.readyExchange] || 'auto');
  if (!kReadyExchanges.includes(readyExchange as ReadyExchange)) {
    throw new InvalidArgumentError(
      `${kEnv.readyExchange} must be one of ${kReadyExchanges.join(', ')}, got ${JSON.stringify(readyExchange)}`,
    );
  }
  const logLevel = o.logLevel ?? env[kEnv.logLevel] ?? 'warn';
  if (!isLogLevel(logLevel)) {
    throw new InvalidArgumentError(`${kEnv.logLevel} must be one of ${kLogLevels.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }
  // A job of one rank has no connection to protect (an elastic one may grow: its size comes later).
  const secret = size === 1 && !env[kEnv.elasticWorker] ? undefined : (o.secret ?? (env[kEnv.secret] || undefined));
  const tls = o.tls ?? envFlag(env, kEnv.tls) ?? false;
  if (tls && backend === 'web') {
    throw new InvalidArgumentError(
      `${kEnv.tls}: the web backend (browser ranks) has no TLS links of its own; serve its page over https instead (docs/browser.md)`,
    );
  }
  if (tls && secret === undefined && (size > 1 || env[kEnv.elasticWorker])) {
    throw new InvalidArgumentError(
      `${kEnv.tls} (ringrun --tls) needs the job secret ${kEnv.secret} to key the TLS links: ringrun sets it; a job started by hand must set the same one on every rank`,
    );
  }

  return Object.freeze({
    rank,
    size,
    localRank,
    localSize,
    crossRank,
    crossSize,
    storeHost: store.host,
    storePort: store.port,
    storeUrl,
    address: o.address ?? (env[kEnv.address] || undefined),
    jobId: o.jobId ?? env[kEnv.jobId] ?? (size === 1 ? randomHex(8) : 'ringreduce'),
    startTimeoutMs: o.startTimeoutMs ?? envInt(env, kEnv.startTimeoutMs, 1) ?? 30_000,
    ioTimeoutMs: o.ioTimeoutMs ?? envInt(env, kEnv.ioTimeoutMs, 1) ?? 30_000,
    stallTimeoutMs: o.stallTimeoutMs ?? envInt(env, kEnv.stallTimeoutMs) ?? 60_000,
    stallWarningMs: o.stallWarningMs ?? envInt(env, kEnv.stallWarningMs) ?? 30_000,
    heartbeatMs: o.heartbeatMs ?? envInt(env, kEnv.heartbeatMs) ?? 2_000,
    networkInterface: o.networkInterface ?? (env[kEnv.networkInterface] || undefined),
    secret,
    logLevel,
    backend: backend as Backend,
    underMpi,
    // 16 MiB, not Horovod's 64: packing costs two copies, and past 16 MiB the copies (and MPI's
    // own large-message path) cost more than the per-collective latency fusion saves (docs/performance.md).
    fusionThresholdBytes: o.fusionThresholdBytes ?? envInt(env, kEnv.fusionThresholdBytes) ?? 16 * 1024 * 1024,
    cacheCapacity: o.cacheCapacity ?? envInt(env, kEnv.cacheCapacity) ?? 1024,
    // 4 MiB: against 256 KiB, 16 MiB allreduces took 14-19 ms instead of 28 ms on 2 ranks and
    // 45-50 ms instead of 86-89 ms on 4 (docs/performance.md); fewer, larger messages win here.
    segmentBytes: o.segmentBytes ?? envInt(env, kEnv.segmentBytes, 1) ?? 4 * 1024 * 1024,
    hierarchicalAllreduce: o.hierarchicalAllreduce ?? envMode(env, kEnv.hierarchicalAllreduce) ?? 'auto',
    hierarchicalAllgather: o.hierarchicalAllgather ?? envMode(env, kEnv.hierarchicalAllgather) ?? 'auto',
    // A burst of 100 calls takes about 1 ms here. Only bursts are held (a lone call never is), so
    // the hold delays just calls that a long computation follows within the same tick.
    burstHoldMs: o.burstHoldMs ?? envInt(env, kEnv.burstHoldMs) ?? 2,
    unixSockets: o.unixSockets ?? env[kEnv.unixSockets] !== '0',
    sharedMemory: o.sharedMemory ?? env[kEnv.sharedMemory] !== '0',
    tls,
    timeline: o.timeline ?? (env[kEnv.timeline] || undefined),
    readyExchange: readyExchange as ReadyExchange,
    costModel:
      o.costModel === undefined
        ? envCostModel(env)
        : Object.freeze(typeof o.costModel === 'string' ? o.costModel : { ...o.costModel }),
    processSets: checkProcessSets(o.processSets ?? [], size),
    jobSource: jobSource === undefined ? undefined : Object.freeze({ ...jobSource }),
    elasticWorker: env[kEnv.elasticWorker] || undefined,
    dashboard: env[kEnv.dashboard] || undefined,
  });
}
