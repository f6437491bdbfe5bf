/**
 * The environment contract between the launcher and the ranks (docs/env.md). The launcher
 * writes these variables; the api reads them once when `init()` runs. Nothing here reads
 * `process.env`: callers pass the base environment in, so the builder stays pure.
 */
import { randomBytes } from 'node:crypto';
import { kEnv } from '../core/env_names.js';
import type { LogLevel } from '../core/log_levels.js';

export { kEnv } from '../core/env_names.js';

/** The address local jobs bind and advertise: loopback never leaves the machine. */
export const kLocalAddress = '127.0.0.1';

/**
 * Engine settings the launcher forwards. An unset field is not written, so a value already
 * in the launcher's own environment reaches the ranks unchanged (and otherwise the rank's
 * default applies).
 */
export interface EngineSettings {
  startTimeoutMs?: number;
  ioTimeoutMs?: number;
  stallTimeoutMs?: number;
  stallWarningMs?: number;
  heartbeatMs?: number;
  logLevel?: LogLevel;
  /** --tls: TLS on every TCP link and store connection, keyed from the job secret. */
  tls?: boolean;
}

/** What every rank of one job shares. */
export interface JobContract {
  size: number;
  /** host:port of the rendezvous store that rank 0 hosts. */
  storeAddr: string;
  jobId: string;
  /** The job secret (RINGREDUCE_SECRET); unset for a job of one rank, which needs none. */
  secret?: string;
  /** Every rank binds to and advertises this interface's address. */
  networkInterface?: string;
  settings: EngineSettings;
}

/** Where one rank sits in the job. */
export interface RankPlacement {
  rank: number;
  localRank: number;
  localSize: number;
  crossRank: number;
  crossSize: number;
  /**
   * The address the rank binds its data listener to and advertises to its peers. Unset (a
   * multi-host job): the rank chooses the address that routes to rank 0's store.
   */
  address?: string;
}

/** 16 hex characters: enough that two jobs on one machine never share an id by chance. */
export function newJobId(): string {
  return randomBytes(8).toString('hex');
}

/** 256 random bits, as 64 hex characters. */
export function newSecret(): string {
  return randomBytes(32).toString('hex');
}

/** `host:port`, with brackets around an IPv6 host so the last colon still splits the port. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Placements of a job whose ranks all run on this machine. */
export function localPlacements(size: number, address: string = kLocalAddress): RankPlacement[] {
  return Array.from({ length: size }, (_, rank) => ({
    rank,
    localRank: rank,
    localSize: size,
    crossRank: 0,
    crossSize: 1,
    address,
  }));
}

/** The contract variables of one rank (only those; merge them over the base environment). */
export function contractEnv(job: JobContract, placement: RankPlacement): Record<string, string> {
  const env: Record<string, string> = {
    [kEnv.rank]: String(placement.rank),
    [kEnv.size]: String(job.size),
    [kEnv.localRank]: String(placement.localRank),
    [kEnv.localSize]: String(placement.localSize),
    [kEnv.crossRank]: String(placement.crossRank),
    [kEnv.crossSize]: String(placement.crossSize),
    [kEnv.storeAddr]: job.storeAddr,
    [kEnv.jobId]: job.jobId,
  };
  if (placement.address !== undefined) env[kEnv.address] = placement.address;
  if (job.secret !== undefined) env[kEnv.secret] = job.secret;
  if (job.networkInterface !== undefined) env[kEnv.networkInterface] = job.networkInterface;
  return { ...env, ...settingsEnv(job.settings) };
}

/**
 * The settings every rank of a collective must share (they decide algorithms and message
 * lengths: the table's rows marked `agree`, which test/unit/agreed_settings.test.ts checks are
 * all here; not derived from the table, which would load its schemas into ringrun) or that the
 * user set for the whole job, which a Node rank inherits from ringrun's environment and a
 * browser rank, which inherits nothing, must be given.
 */
export const kJobWideVariables: readonly string[] = Object.freeze([
  kEnv.startTimeoutMs,
  kEnv.ioTimeoutMs,
  kEnv.stallTimeoutMs,
  kEnv.stallWarningMs,
  kEnv.heartbeatMs,
  kEnv.logLevel,
  kEnv.fusionThresholdBytes,
  kEnv.cacheCapacity,
  kEnv.segmentBytes,
  kEnv.hierarchicalAllreduce,
  kEnv.hierarchicalAllgather,
  kEnv.burstHoldMs,
  kEnv.readyExchange,
  kEnv.costModel,
  kEnv.algorithms,
  kEnv.autotune,
]);

/** The job-wide settings set in `env` (ringrun's environment), for a rank that does not inherit it. */
export function jobWideEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of kJobWideVariables) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** The variables of the settings that were given (flags), and only those. */
export function settingsEnv(settings: EngineSettings): Record<string, string> {
  const env: Record<string, string> = {};
  const { startTimeoutMs, ioTimeoutMs, stallTimeoutMs, stallWarningMs, heartbeatMs, logLevel } = settings;
  if (startTimeoutMs !== undefined) env[kEnv.startTimeoutMs] = String(startTimeoutMs);
  if (ioTimeoutMs !== undefined) env[kEnv.ioTimeoutMs] = String(ioTimeoutMs);
  if (stallTimeoutMs !== undefined) env[kEnv.stallTimeoutMs] = String(stallTimeoutMs);
  if (stallWarningMs !== undefined) env[kEnv.stallWarningMs] = String(stallWarningMs);
  if (heartbeatMs !== undefined) env[kEnv.heartbeatMs] = String(heartbeatMs);
  if (logLevel !== undefined) env[kEnv.logLevel] = logLevel;
  if (settings.tls === true) env[kEnv.tls] = '1';
  return env;
}

/**
 * glibc malloc settings ringrun gives its ranks, unless the user set either: keep freed memory
 * for reuse (large blocks from the heap, no trimming) instead of returning it to the system.
 * A loop of collectives with fresh outputs then gets recycled memory, not new pages, whose first
 * touch costs 14-35 µs per 4 KiB page on the VMs measured (docs/performance.md, "Fresh memory").
 * Other C libraries ignore them.
 */
export const kAllocatorEnv: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(1024 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(4 * 1024 * 1024 * 1024),
};

export function allocatorEnv(base: NodeJS.ProcessEnv): Record<string, string> {
  if (Object.keys(kAllocatorEnv).some((name) => base[name] !== undefined)) return {};
  return { ...kAllocatorEnv };
}

/** The full environment of one rank: the base environment with the contract written over it. */
export function rankEnv(base: NodeJS.ProcessEnv, job: JobContract, placement: RankPlacement): NodeJS.ProcessEnv {
  return { ...base, ...contractEnv(job, placement) };
}
