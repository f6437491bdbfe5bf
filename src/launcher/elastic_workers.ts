/**
 * Starting an elastic job's workers (elastic_driver.ts): where its store listens, and each
 * worker's process, on this machine or over ssh (remote_shell.ts), with the environment that
 * makes it a worker (its id, the store, the job's secret; no rank: that comes from the
 * generations).
 */
import { isIP } from 'node:net';
import { kEnv } from '../core/env_names.js';
import { type ElasticHosts, kThisHost } from './elastic_hosts.js';
import { allocatorEnv, kLocalAddress, settingsEnv } from './env_contract.js';
import type { HostSlots } from './hosts.js';
import type { LaunchConfig, RunIo } from './launch_config.js';
import { RankProcess } from './rank_process.js';
import type { RankRunner } from './rank_runner.js';
import { remoteScript, sshArgv } from './remote_shell.js';
import { reachableHere, ringreduceEnv } from './run_job.js';

/** Where the workers meet: the store's bind address and the address each worker is given. */
export interface StorePlace {
  bind: string;
  advertise: string;
  /** Whether workers on other hosts can reach it (else the job stays on this machine). */
  reachable: boolean;
}

/**
 * Where the store listens. On this machine only: loopback. With other hosts (or a
 * --network-interface): this machine as they reach it (run_job.ts's rule for the store of a
 * job whose rank 0 runs here), bound to that address.
 */
export async function storePlace(config: LaunchConfig, hosts: ElasticHosts, listed: readonly HostSlots[]): Promise<StorePlace> {
  const remote = listed.find((h) => hosts.key(h.host) !== kThisHost);
  if (remote === undefined && config.networkInterface === undefined) {
    return { bind: kLocalAddress, advertise: kLocalAddress, reachable: false };
  }
  const here = listed.find((h) => hosts.key(h.host) === kThisHost)?.host ?? kThisHost;
  const advertise = await reachableHere(config, here, remote?.host ?? kThisHost);
  return { bind: isIP(advertise) !== 0 ? advertise : '0.0.0.0', advertise, reachable: true };
}

/** What every worker of one job shares. */
export interface WorkerLaunch {
  config: LaunchConfig;
  io: RunIo;
  jobId: string;
  secret: string;
  /** The first line of every remote worker's session script (remote_shell.ts). */
  marker: string;
  /** The store's host:port as the workers are given it. */
  storeAddr: string;
  reachable: boolean;
  /** --browser: the address the Node workers bind (the page's host); they run the web backend. */
  browserNodeAddress: string | undefined;
  /** -x variables. */
  forwarded: Record<string, string>;
  startTimeoutMs: number;
  /** How long a worker waits for a generation that lists it. */
  workerStartTimeoutMs: number;
}

const kPlacementVariables = [kEnv.rank, kEnv.size, kEnv.localRank, kEnv.localSize, kEnv.crossRank, kEnv.crossSize];

/** Starts worker `id` (output prefixed with `number`) on `host` (kThisHost: this machine; another: over ssh). */
export function spawnWorker(launch: WorkerLaunch, number: number, id: string, host: string): RankProcess {
  const { config, io } = launch;
  const contract: Record<string, string> = {
    ...launch.forwarded,
    [kEnv.elasticWorker]: id,
    [kEnv.storeAddr]: launch.storeAddr,
    [kEnv.jobId]: launch.jobId,
    [kEnv.secret]: launch.secret,
    // Across hosts each worker binds to and advertises its address toward the store (transport/tcp).
    ...(!launch.reachable && { [kEnv.address]: launch.browserNodeAddress ?? kLocalAddress }),
    ...(config.networkInterface !== undefined && { [kEnv.networkInterface]: config.networkInterface }),
    ...(launch.browserNodeAddress !== undefined && { [kEnv.backend]: 'web' }),
    ...settingsEnv(config.settings),
    [kEnv.startTimeoutMs]: String(launch.workerStartTimeoutMs),
  };
  const sinks = { stdout: io.stdout, stderr: io.stderr };
  if (host === kThisHost) {
    const env: NodeJS.ProcessEnv = { ...io.env, ...allocatorEnv(io.env), ...contract };
    // Rank and size come from the generations; stale ones in ringrun's environment would mislead.
    for (const name of kPlacementVariables) delete env[name];
    return new RankProcess({
      rank: number,
      command: config.command,
      args: config.args,
      env,
      sinks,
      tailLines: 10,
      guard: io.guard,
    });
  }
  const env: Record<string, string> = { ...ringreduceEnv(io.env), ...contract };
  for (const name of kPlacementVariables) delete env[name];
  const argv = sshArgv({ ...config.ssh, connectTimeoutS: Math.max(1, Math.ceil(launch.startTimeoutMs / 1000)) }, host);
  return new RankProcess({
    rank: number,
    command: argv[0] as string,
    args: argv.slice(1),
    env: io.env,
    sinks,
    tailLines: 10,
    guard: io.guard,
    remote: { host, marker: launch.marker, stdin: remoteScript(launch.marker, env, io.cwd, config.command, config.args) },
  });
}

/** How long stopped workers get to exit before they are killed. */
const kStopGraceMs = 3000;

/** Stops `workers`: SIGTERM (a remote one's session stops it), then SIGKILL to those left after kStopGraceMs. */
export async function stopWorkers(workers: readonly RankRunner[]): Promise<void> {
  for (const worker of workers) worker.stop('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(workers.map((w) => w.exited)),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, kStopGraceMs))),
  ]);
  clearTimeout(timer);
  for (const worker of workers) if (!worker.hasExited) worker.stop('SIGKILL');
}
