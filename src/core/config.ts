/**
 * The one place that reads the environment. `resolveConfig` merges init() options (which win)
 * with the environment contract of docs/env.md into one frozen Config that the runtime and the
 * engine share; nothing else looks at process.env. The tunable settings are rows of one table
 * (settings.ts); the job's identity comes from the launcher's variables (launcher_sources.ts).
 *
 * Rank and size come from the first source that sets them: RINGREDUCE_*, Open MPI
 * (OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE, ...), Slurm (SLURM_PROCID, ...), then PMI.
 * Without any, the process is a job of size 1; so is one with RINGREDUCE_SIZE=1 alone, whatever
 * else is set. A source other than RINGREDUCE_* is recorded (Config.jobSource), so that a
 * process that joined a job because of variables left in its environment says so.
 */
import { z } from 'zod';
import type { AlgorithmsSetting } from './algorithm_names.js';
import { kEnv } from './env_names.js';
import type { Env } from './env_values.js';
import { InvalidArgumentError } from './errors.js';
import { type JobSource, joinedBecause } from './job_source.js';
import { placementFromEnv, storeAddressFromEnv } from './launcher_sources.js';
import type { LogLevel } from './log_levels.js';
import {
  type Backend,
  type CostFigures,
  type CostModelSetting,
  type ReadyExchange,
  resolveSettings,
  type SettingName,
  type SettingValues,
  settingsSchemaShape,
} from './settings.js';
import type { HierarchicalMode } from './types.js';

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
  /**
   * Node: the engine runs on a worker thread of its own (true) or on the caller's thread
   * (false: one thread hand-off less per call; no ...Sync calls; platform/node/engine_in_thread.ts).
   */
  readonly engineThread: boolean;
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
  /**
   * Algorithms forced per collective (core/algorithm_names.ts), in place of the engine's choice
   * (docs/algorithms.md, "Forcing an algorithm"); undefined or `auto`: the engine chooses. The
   * same on every rank.
   */
  readonly algorithms: AlgorithmsSetting | undefined;
  /**
   * Tune the world's fusion threshold and burst hold during the first steps of the job, then keep
   * the best (engine/tuning/); fusionThresholdBytes and burstHoldMs are where it starts.
   */
  readonly autotune: boolean;
  /** With autotune: a CSV file that rank 0 appends a line per trial to (the settings tried, the score), or undefined. */
  readonly autotuneLog: string | undefined;
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

export type { AlgorithmsSetting } from './algorithm_names.js';
export type { Backend, CostFigures, CostModelSetting, ReadyExchange } from './settings.js';

const rankField = z.number().int().nonnegative();

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
  jobId: z.string().min(1).max(128).optional(),
  secret: z.string().min(1).optional(),
  processSets: z.array(z.array(rankField).min(1)).optional(),
  ...settingsSchemaShape(),
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
  /** Node: run the engine on a worker thread of its own (default `true`) or on the calling thread (`false`: faster small calls, no ...Sync calls; `RINGREDUCE_ENGINE_THREAD`). */
  engineThread?: boolean;
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
  /**
   * Force a collective's algorithm instead of the engine's choice, such as
   * `{ broadcast: 'scatter_allgather', allreduce: 'rabenseifner' }` (`'auto'`: the engine
   * chooses); replaces `RINGREDUCE_ALGORITHMS` as a whole. The same on every rank (docs/algorithms.md).
   */
  algorithms?: AlgorithmsSetting;
  /** Tune the fusion threshold and burst hold online during the first steps, then keep the best (default `false`; `RINGREDUCE_AUTOTUNE`). */
  autotune?: boolean;
  /** With autotune: rank 0 appends a CSV line per trial (settings tried, score) to this file (`RINGREDUCE_AUTOTUNE_LOG`). */
  autotuneLog?: string;
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

/**
 * Compile-time check that Config (written out, for its docs) gives each setting of the table
 * the type the table resolves it to.
 */
const kConfigMatchesSettings: { [K in SettingName]: Same<Config[K], SettingValues[K]> }[SettingName] = true;
void kConfigMatchesSettings;

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

function parseHostPort(text: string, what: string): { host: string; port: number } {
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(text);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match?.[1] || !(port >= 0 && port <= 65535)) {
    throw new InvalidArgumentError(`${what} must be host:port, got ${JSON.stringify(text)}`);
  }
  return { host: match[1], port };
}

export function resolveConfig(options: InitOptions = {}, env: Env = process.env): Config {
  const parsed = kOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `init option '${issue.path.join('.')}'` : 'init options';
    throw new InvalidArgumentError(`${where}: ${issue?.message ?? 'invalid'}`);
  }
  const o = parsed.data;
  const settings = resolveSettings(o, env);
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
  const { backend, tls } = settings;
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
  // A job of one rank has no connection to protect (an elastic one may grow: its size comes later).
  const secret = size === 1 && !env[kEnv.elasticWorker] ? undefined : (o.secret ?? (env[kEnv.secret] || undefined));
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
    ...settings,
    rank,
    size,
    localRank,
    localSize,
    crossRank,
    crossSize,
    storeHost: store.host,
    storePort: store.port,
    storeUrl,
    jobId: o.jobId ?? env[kEnv.jobId] ?? (size === 1 ? randomHex(8) : 'ringreduce'),
    secret,
    underMpi,
    processSets: checkProcessSets(o.processSets ?? [], size),
    jobSource: jobSource === undefined ? undefined : Object.freeze({ ...jobSource }),
    elasticWorker: env[kEnv.elasticWorker] || undefined,
    dashboard: env[kEnv.dashboard] || undefined,
  });
}
