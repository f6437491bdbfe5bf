/**
 * Glue between the parsed command line and a Job: places the ranks on the hosts, chooses the
 * store address and port, makes the job's id and secret, builds each rank's environment (local)
 * or ssh session (remote), opens the log files, shows progress, forwards interrupts and prints
 * the final report. Process-wide things (signal handlers, stdout) come in through RunIo so this
 * stays testable.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { InvalidArgumentError } from '../core/errors.js';
import { interfaceAddress } from '../rendezvous/addresses.js';
import { BrowserJob } from './browser/browser_job.js';
import {
  allocatorEnv,
  contractEnv,
  formatHostPort,
  type JobContract,
  kEnv,
  kLocalAddress,
  newJobId,
  newSecret,
} from './env_contract.js';
import { failureReport, notStartedReport, signalExitCode } from './failure_report.js';
import { findFreePort } from './free_port.js';
import { isLocalHost } from './hosts.js';
import { Job } from './job.js';
import type { LaunchConfig, RunIo } from './launch_config.js';
import { type PlacedRank, placeRanks } from './placement.js';
import { Progress } from './progress.js';
import { RankLogFiles } from './rank_log_files.js';
import type { RankSinks, RankSpec } from './rank_process.js';
import { remoteScript, sshArgv } from './remote_shell.js';
import { StartUp } from './start_up.js';
import { rankDialsStore, StoreWatch } from './store_watch.js';
import { TimelineFiles } from './timeline_files.js';

export const kDefaultStartTimeoutMs = 30_000;
/** A remote rank 0's store port, when not given: below Linux's ephemeral range (32768+). */
const kRemotePortRange = [20_000, 32_000] as const;

export async function runJob(config: LaunchConfig, io: RunIo): Promise<number> {
  let placed: PlacedRank[];
  let extraEnv: Record<string, string>;
  try {
    placed = config.hosts === undefined ? localRanks(config.np) : placeRanks(config.np, config.hosts, isLocalHost);
    extraEnv = { ...allocatorEnv(io.env), ...forwardedEnv(config, io.env) };
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    io.log(error.message);
    return 2;
  }
  const hostsUsed = [...new Set(placed.map((p) => p.host))];
  const size = config.np + (config.browser?.count ?? 0);
  if (config.address !== undefined && hostsUsed.length > 1) {
    io.log('--address names one address, for a job on one host; use --network-interface for several hosts');
    return 2;
  }
  // Before the signal handlers go in: until then a signal still ends ringrun the default way.
  let logs: RankLogFiles | undefined;
  if (config.outputDir !== undefined) {
    try {
      logs = new RankLogFiles(config.outputDir, size, io.log);
    } catch (error) {
      io.log(`--output-dir ${config.outputDir}: ${(error as Error).message}`);
      return 1;
    }
  }
  let timeline: TimelineFiles | undefined;
  if (config.timeline !== undefined) {
    try {
      timeline = new TimelineFiles(config.timeline, io.cwd);
    } catch (error) {
      io.log(`--timeline ${config.timeline}: ${(error as Error).message}`);
      await logs?.close();
      return 1;
    }
  }
  let job: Job | undefined;
  let early: NodeJS.Signals | undefined;
  let merged = false;
  const unsubscribe = io.onInterrupt((signal) => {
    if (job !== undefined) job.interrupt(signal);
    else early ??= signal;
  });
  const watching = new AbortController();
  let progress: Progress | undefined;
  let browserJob: BrowserJob | undefined;
  try {
    const jobId = newJobId();
    const secret = newSecret();
    let store: { host: string; port: number; reachable: boolean };
    try {
      if (config.browser !== undefined) {
        browserJob = await BrowserJob.start({
          settings: config.browser,
          np: config.np,
          jobId,
          secret,
          address: config.address,
          env: io.env,
          ...(io.guard && { guard: io.guard }),
          log: io.log,
          debug: io.debug,
        });
        store = { host: kLocalAddress, port: 0, reachable: false };
      } else store = await chooseStore(config, placed, hostsUsed);
    } catch (error) {
      if (error instanceof InvalidArgumentError) {
        io.log(error.message);
        return 2;
      }
      io.log(`cannot choose the rendezvous store address: ${(error as Error).message}`);
      return 1;
    }
    if (early !== undefined) return signalExitCode(early);
    const startTimeoutMs = config.settings.startTimeoutMs ?? envMs(io.env.RINGREDUCE_START_TIMEOUT_MS) ?? kDefaultStartTimeoutMs;
    const contract: JobContract = {
      size,
      storeAddr: browserJob?.storeAddr ?? formatHostPort(store.host, store.port),
      jobId,
      ...(size > 1 && { secret }),
      ...(config.networkInterface !== undefined && { networkInterface: config.networkInterface }),
      settings: config.settings,
    };
    const address =
      config.address ?? (hostsUsed.length === 1 && config.networkInterface === undefined ? kLocalAddress : undefined);
    io.debug(
      `job ${contract.jobId}: ${config.np} ranks of '${config.command}' on ${hostsUsed.join(', ')}, store at ${contract.storeAddr}`,
    );
    if (size > 1) {
      progress = new Progress({
        size,
        tty: io.stderrIsTty,
        verbose: config.verbose,
        write: io.stderr,
        limitMs: startTimeoutMs,
      });
    }
    const shown = progress;
    const sinks = (rank: number): RankSinks => ({
      stdout: (text) => {
        shown?.hide();
        io.stdout(text);
      },
      stderr: (text) => {
        shown?.hide();
        io.stderr(text);
      },
      line: logs?.lineSink(rank),
    });
    const marker = `ringrun-started-${randomBytes(12).toString('hex')}`;
    const specs = buildSpecs(
      () =>
        placed.map((p): RankSpec => {
          const env = browserJob
            ? { ...extraEnv, ...contractEnv(contract, browserJob.nodePlacement(p.rank)), ...browserJob.nodeEnv() }
            : { ...extraEnv, ...contractEnv(contract, { ...p, ...(address !== undefined && { address }) }) };
          if (timeline !== undefined) {
            env[kEnv.timeline] = p.local ? timeline.rankPath : TimelineFiles.remotePath(contract.jobId);
          }
          const base = { rank: p.rank, sinks: sinks(p.rank), tailLines: 10, guard: io.guard };
          if (p.local) return { ...base, command: config.command, args: config.args, env: { ...io.env, ...env } };
          const remoteEnv = { ...ringreduceEnv(io.env), ...env };
          const argv = sshArgv({ ...config.ssh, connectTimeoutS: Math.max(1, Math.ceil(startTimeoutMs / 1000)) }, p.host);
          return {
            ...base,
            command: argv[0] as string,
            args: argv.slice(1),
            env: io.env,
            remote: { host: p.host, marker, stdin: remoteScript(marker, remoteEnv, io.cwd, config.command, config.args) },
          };
        }),
      io,
    );
    if (specs === undefined) return 2;
    // The ranks' rendezvous, seen from here: what start-up waits for, and who never called init().
    let watch: StoreWatch | undefined;
    let startUp: StartUp | undefined;
    if (config.np > 1 && store.reachable) {
      const ranks = new StartUp({
        size: config.np,
        calledInit: async (rank) => watch?.calledInit(rank),
        ...(placed[0]?.local === true && {
          rankDialsStore: () => {
            watch?.stop(); // its own dials are not a rank's
            // Past the start-up deadline no rank is still dialing the store.
            const until = AbortSignal.any([watching.signal, AbortSignal.timeout(startTimeoutMs)]);
            return rankDialsStore(isIP(store.host) !== 0 ? store.host : '0.0.0.0', store.port, until);
          },
        }),
        onExitedBeforeInit: (rank) => job?.exitedBeforeInit(rank),
      });
      startUp = ranks;
      watch = new StoreWatch({
        host: store.host,
        port: store.port,
        jobId: contract.jobId,
        secret: contract.secret,
        // --tls, or RINGREDUCE_TLS in our environment, which the ranks inherit.
        tls: config.settings.tls === true || io.env[kEnv.tls] === '1',
        size: config.np,
        timeoutMs: startTimeoutMs,
        signal: watching.signal,
        onStore: () => {
          ranks.onStore();
          progress?.onStore();
        },
        onPublished: (rank) => {
          ranks.onInit(rank);
          progress?.onPublished(rank);
        },
        onFinished: (rank) => {
          ranks.onFinished(rank);
          progress?.onFinished(rank);
        },
        onConnected: () => {
          ranks.onConnected();
          progress?.onConnected();
        },
      });
    }
    job = new Job({
      ranks: specs,
      ...(browserJob && { otherRanks: browserJob.ranks(contract, sinks).ranks }),
      startTimeoutMs,
      log: io.log,
      debug: io.debug,
      onStarted: (count) => progress?.onStarted(count),
      onExit: (exit) => {
        progress?.onExited(exit.rank);
        startUp?.onExit(exit);
      },
      ...(startUp !== undefined && { startUp }),
    });
    void watch?.run();
    if (browserJob !== undefined) {
      const running = job;
      browserJob.open().catch((error: Error) => running.abort(`cannot open the browser ranks: ${error.message}`, 1));
    }
    const outcome = await job.finished;
    progress?.stop();
    await browserJob?.close();
    merged = true;
    timeline?.finish(
      placed.filter((p) => p.local).map((p) => p.rank),
      config.np,
      placed.filter((p) => !p.local).map((p) => ({ rank: p.rank, host: p.host, jobId: contract.jobId })),
      io.log,
    );
    if (outcome.failure !== undefined) {
      for (const line of failureReport(outcome.failure)) io.log(line);
    } else if (outcome.notStarted !== undefined) {
      for (const line of notStartedReport(outcome.notStarted, startTimeoutMs)) io.log(line);
    } else if (outcome.interruptedBy === undefined) {
      io.debug(`all ${size} ranks exited with code 0`);
    }
    return outcome.exitCode;
  } finally {
    await browserJob?.close();
    watching.abort();
    progress?.stop();
    unsubscribe();
    if (!merged) timeline?.discard();
    await logs?.close();
  }
}

/** The specs, or undefined after logging a usage error (a variable that cannot be sent). */
export function buildSpecs(build: () => RankSpec[], io: RunIo): RankSpec[] | undefined {
  try {
    return build();
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    io.log(error.message);
    return undefined;
  }
}

function localRanks(np: number): PlacedRank[] {
  return Array.from({ length: np }, (_, rank) => ({
    rank,
    localRank: rank,
    localSize: np,
    crossRank: 0,
    crossSize: 1,
    host: 'localhost',
    local: true,
  }));
}

/** -x variables: NAME=VALUE as given, NAME with this launcher's value. */
export function forwardedEnv(config: LaunchConfig, env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { name, value } of config.env) {
    const resolved = value ?? env[name];
    if (resolved === undefined) throw new InvalidArgumentError(`-x ${name}: ${name} is not set in ringrun's environment`);
    out[name] = resolved;
  }
  return out;
}

/** The RINGREDUCE_* settings in ringrun's own environment, which remote ranks get too. */
export function ringreduceEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (name.startsWith('RINGREDUCE_') && value !== undefined) out[name] = value;
  return out;
}

export function envMs(text: string | undefined): number | undefined {
  const value = Number(text);
  return text !== undefined && text !== '' && Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

/**
 * Where rank 0 hosts the store. One host: its loopback address. Several: rank 0's host as
 * every rank can reach it: as given in -H, or, when rank 0 runs here under a loopback name,
 * this machine's address on the route to the other hosts (never loopback for another host).
 */
async function chooseStore(
  config: LaunchConfig,
  placed: readonly PlacedRank[],
  hostsUsed: readonly string[],
): Promise<{ host: string; port: number; reachable: boolean }> {
  const first = placed[0] as PlacedRank;
  let host: string;
  if (hostsUsed.length === 1) host = kLocalAddress;
  else if (!first.local) host = first.host;
  else host = await reachableHere(config, first.host, (placed.find((p) => !p.local) as PlacedRank).host);
  if (config.storePort !== undefined) return { host, port: config.storePort, reachable: first.local || hostsUsed.length > 1 };
  if (!first.local) {
    const [low, high] = kRemotePortRange;
    return { host, port: randomInt(low, high), reachable: hostsUsed.length > 1 };
  }
  const bindHost = isIP(host) !== 0 ? host : '0.0.0.0';
  return { host, port: await findFreePort(bindHost), reachable: true };
}

/**
 * This machine as other hosts reach it: --network-interface's address, else the name it is
 * listed under (`listedAs`) unless that is loopback, else this machine's address on the route
 * to `remote` (never loopback for another host).
 */
export async function reachableHere(config: LaunchConfig, listedAs: string, remote: string): Promise<string> {
  if (config.networkInterface !== undefined) return interfaceAddress(config.networkInterface);
  if (listedAs !== 'localhost' && !listedAs.startsWith('127.') && listedAs !== '::1') return listedAs;
  return (await routeAddress(remote)) ?? hostname();
}

/** The local address the kernel would send from to reach `host` (a UDP connect sends nothing). */
function routeAddress(host: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = createSocket(isIP(host) === 6 ? 'udp6' : 'udp4');
    const done = (address: string | undefined) => {
      socket.close();
      resolve(address);
    };
    socket.on('error', () => done(undefined));
    socket.connect(9, host, () => {
      try {
        done(socket.address().address);
      } catch {
        done(undefined);
      }
    });
  });
}
