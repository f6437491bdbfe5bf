/**
 * The one place that reads the environment. `resolveConfig` merges init() options (which win)
 * with the environment contract of docs/env.md into one frozen Config that the runtime and the
 * engine share; nothing else looks at process.env.
 *
 * Rank and size come from the first source that sets them: RINGREDUCE_*, Open MPI
 * (OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE, ...), then Slurm or PMI. Without any, the
 * process is a job of size 1.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { kEnv } from './env_names.js';
import { InvalidArgumentError } from './errors.js';
import { isLogLevel, kLogLevels, type LogLevel } from './log_levels.js';

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
  /** 'tcp' (default), 'mpi' (the native addon), or 'auto' (mpi when started by mpirun and the addon loads). */
  readonly backend: Backend;
  /** Performance settings (docs/performance.md); owned by the engine. */
  /** Allreduces ready together are packed into one buffer up to this many bytes; 0 disables fusion. */
  readonly fusionThresholdBytes: number;
  /** Negotiation responses remembered per rank (the response cache); 0 disables the cache. */
  readonly cacheCapacity: number;
  /** Bytes per message of the pipelined ring and chain algorithms (the same on every rank). */
  readonly segmentBytes: number;
  /**
   * How long the engine may hold its report of a call while the caller is still making more
   * calls in the same synchronous burst (so the burst runs fused); 0: report at once.
   */
  readonly burstHoldMs: number;
  /** TCP backend: ranks on the same host talk over Unix domain sockets (faster than loopback TCP). */
  readonly unixSockets: boolean;
  /** TCP backend: large messages between ranks of one host go through files in /dev/shm (shm_lane.ts). */
  readonly sharedMemory: boolean;
  /** Chrome trace file of the engine's phases (rank r > 0 of a larger job: see timelinePathFor), or undefined. */
  readonly timeline: string | undefined;
  /** Process sets defined from the start (ids 1, 2, ... in this order): ranks of the job, the same on every rank. */
  readonly processSets: readonly (readonly number[])[];
  /**
   * Elastic mode (ringrun --elastic): this process's worker id. Rank and size then come from the
   * generation the launcher publishes in its store (elastic/membership.ts), not from the environment,
   * and no rank hosts the store.
   */
  readonly elasticWorker: string | undefined;
}

export type Backend = 'tcp' | 'mpi' | 'auto';
const kBackends: readonly Backend[] = ['tcp', 'mpi', 'auto'];

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
  backend: z.enum(['tcp', 'mpi', 'auto']).optional(),
  fusionThresholdBytes: z.number().int().nonnegative().optional(),
  cacheCapacity: z.number().int().nonnegative().optional(),
  segmentBytes: z.number().int().positive().optional(),
  burstHoldMs: timeoutField.optional(),
  unixSockets: z.boolean().optional(),
  sharedMemory: z.boolean().optional(),
  timeline: z.string().min(1).optional(),
  processSets: z.array(z.array(rankField).min(1)).optional(),
});

/** Options of init(); each wins over its environment variable (docs/env.md). */
export type InitOptions = z.input<typeof kOptionsSchema>;

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

/** The first source, in precedence order, that sets both rank and size. */
function rankAndSizeFromEnv(env: Env) {
  const sources = [
    [kEnv.rank, kEnv.size, kEnv.localRank, kEnv.localSize],
    ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_SIZE'],
    ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'],
    ['SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID', 'SLURM_NTASKS_PER_NODE'],
    ['PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID', 'MPI_LOCALNRANKS'],
  ] as const;
  for (const [r, s, lr, ls] of sources) {
    const rank = envInt(env, r);
    const size = envInt(env, s);
    if (rank !== undefined && size !== undefined) {
      return { rank, size, localRank: envInt(env, lr), localSize: envInt(env, ls) };
    }
  }
  return undefined;
}

function parseHostPort(text: string, what: string): { host: string; port: number } {
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(text);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match?.[1] || !(port >= 0 && port <= 65535)) {
    throw new InvalidArgumentError(`${what} must be host:port, got ${JSON.stringify(text)}`);
  }
  return { host: match[1], port };
}

function storeAddressFromEnv(env: Env): string | undefined {
  if (env[kEnv.storeAddr]) return env[kEnv.storeAddr];
  if (env.MASTER_ADDR && env.MASTER_PORT) return `${env.MASTER_ADDR}:${env.MASTER_PORT}`;
  return undefined;
}

/** Every set: ranks of the job, none twice. */
function checkProcessSets(sets: readonly number[][], size: number): readonly (readonly number[])[] {
  for (const [i, ranks] of sets.entries()) {
    const bad = ranks.find((r) => r >= size);
    if (bad !== undefined)
      throw new InvalidArgumentError(`init option 'processSets[${i}]' has rank ${bad}, not in a job of ${size}`);
    if (new Set(ranks).size !== ranks.length) {
      throw new InvalidArgumentError(`init option 'processSets[${i}]' names a rank twice: [${ranks.join(', ')}]`);
    }
  }
  return Object.freeze(sets.map((ranks) => Object.freeze([...ranks])));
}

export function resolveConfig(options: InitOptions = {}, env: Env = process.env): Config {
  const parsed = kOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `init option '${issue.path.join('.')}'` : 'init options';
    throw new InvalidArgumentError(`${where}: ${issue?.message ?? 'invalid'}`);
  }
  const o = parsed.data;
  const fromEnv = rankAndSizeFromEnv(env);
  const size = o.size ?? fromEnv?.size ?? 1;
  const rank = o.rank ?? fromEnv?.rank ?? 0;
  if (rank >= size) throw new InvalidArgumentError(`rank ${rank} is out of range for a job of size ${size}`);
  const localSize = o.localSize ?? fromEnv?.localSize ?? size;
  const localRank = o.localRank ?? fromEnv?.localRank ?? rank;
  const crossSize = o.crossSize ?? envInt(env, kEnv.crossSize) ?? 1;
  const crossRank = o.crossRank ?? envInt(env, kEnv.crossRank) ?? 0;

  const storeText = o.storeAddress ?? storeAddressFromEnv(env);
  const backend = o.backend ?? env[kEnv.backend] ?? 'auto';
  if (!kBackends.includes(backend as Backend)) {
    throw new InvalidArgumentError(`RINGREDUCE_BACKEND must be tcp, mpi or auto, got ${JSON.stringify(backend)}`);
  }
  const underMpi = env.OMPI_COMM_WORLD_SIZE !== undefined || env.PMI_SIZE !== undefined;
  // The MPI backend needs no store: only a TCP job must know where rank 0's store is.
  const mayUseMpi = backend === 'mpi' || (backend === 'auto' && underMpi);
  if (size > 1 && storeText === undefined && !mayUseMpi) {
    throw new InvalidArgumentError(
      `a job of size ${size} needs the rendezvous address: set RINGREDUCE_STORE_ADDR (or MASTER_ADDR and MASTER_PORT), or start the job with ringrun`,
    );
  }
  const store = storeText === undefined ? { host: '127.0.0.1', port: 0 } : parseHostPort(storeText, 'store address');
  const logLevel = o.logLevel ?? env[kEnv.logLevel] ?? 'warn';
  if (!isLogLevel(logLevel)) {
    throw new InvalidArgumentError(`${kEnv.logLevel} must be one of ${kLogLevels.join(', ')}, got ${JSON.stringify(logLevel)}`);
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
    address: o.address ?? (env[kEnv.address] || undefined),
    jobId: o.jobId ?? env[kEnv.jobId] ?? (size === 1 ? randomBytes(8).toString('hex') : 'ringreduce'),
    startTimeoutMs: o.startTimeoutMs ?? envInt(env, kEnv.startTimeoutMs, 1) ?? 30_000,
    ioTimeoutMs: o.ioTimeoutMs ?? envInt(env, kEnv.ioTimeoutMs, 1) ?? 30_000,
    stallTimeoutMs: o.stallTimeoutMs ?? envInt(env, kEnv.stallTimeoutMs) ?? 60_000,
    stallWarningMs: o.stallWarningMs ?? envInt(env, kEnv.stallWarningMs) ?? 30_000,
    heartbeatMs: o.heartbeatMs ?? envInt(env, kEnv.heartbeatMs) ?? 2_000,
    networkInterface: o.networkInterface ?? (env[kEnv.networkInterface] || undefined),
    // A job of one rank has no connection to protect (an elastic one may grow: its size comes later).
    secret: size === 1 && !env[kEnv.elasticWorker] ? undefined : (o.secret ?? (env[kEnv.secret] || undefined)),
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
    // A burst of 100 calls takes about 1 ms here. Only bursts are held (a lone call never is), so
    // the hold delays just calls that a long computation follows within the same tick.
    burstHoldMs: o.burstHoldMs ?? envInt(env, kEnv.burstHoldMs) ?? 2,
    unixSockets: o.unixSockets ?? env[kEnv.unixSockets] !== '0',
    sharedMemory: o.sharedMemory ?? env[kEnv.sharedMemory] !== '0',
    timeline: o.timeline ?? (env[kEnv.timeline] || undefined),
    processSets: checkProcessSets(o.processSets ?? [], size),
    elasticWorker: env[kEnv.elasticWorker] || undefined,
  });
}
