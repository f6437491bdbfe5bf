/**
 * The `ringrun` command line: `ringrun -np N [-H hosts] [options] <command> [args...]`.
 * Parsing is pure but for reading --hostfile (parseArgs); main() wires the parsed job to the
 * process (signals, stdout, exit code).
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { InvalidArgumentError } from '../core/errors.js';
import { kLogLevels } from '../core/log_levels.js';
import { parseCount, parseDuration, parseEnvItem, parseLogLevel, parsePort } from './arg_values.js';
import type { ElasticSettings } from './elastic_driver.js';
import { runElastic } from './elastic_driver.js';
import type { EngineSettings } from './env_contract.js';
import { type HostSlots, parseHostfile, parseHostList } from './hosts.js';
import type { LaunchConfig, RunIo } from './launch_config.js';
import { attemptIo, withRestarts } from './restarts.js';
import { runJob } from './run_job.js';
import { runMpi } from './run_mpi.js';

export type { LaunchConfig } from './launch_config.js';
export type ParsedArgs = { kind: 'help'; text: string } | { kind: 'launch'; config: LaunchConfig };

const kExamples = `
Examples:
  ringrun -np 4 node train.js --epochs 10
  ringrun -np 8 -H node1:4,node2:4 node train.js
  ringrun --hostfile hosts.txt --network-interface eth0 -x NODE_OPTIONS node train.js
  ringrun -np 2 --log-level debug --output-dir logs -- node bench.js
  ringrun -n 3 --start-timeout 2m --stall-timeout 0 sh -c 'node worker.js > /dev/null'

Options placed after <command> belong to the command; '--' also ends ringrun's options.
Durations are milliseconds (30000) or carry a unit (500ms, 30s, 2m).
Each rank gets RINGREDUCE_RANK, RINGREDUCE_SIZE, RINGREDUCE_STORE_ADDR, RINGREDUCE_SECRET, ...
(docs/env.md); its output lines are prefixed with [rank]. Ranks on other hosts are started
with ssh (non-interactive: set up keys first); their environment travels over ssh's stdin,
never on a command line.

Exit status: 0 when every rank exits 0; else the first failed rank's code (128+N when
killed by signal N; 127 when the command is not found); 124 when ranks did not start
within --start-timeout; 130/143 when ringrun gets SIGINT/SIGTERM; 2 for a usage error.
`;

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

function buildProgram(out: { text: string }): Command {
  return new Command('ringrun')
    .usage('-np <count> [-H <hosts>] [options] <command> [args...]')
    .description('Start <count> processes of <command>, on this machine or on several over ssh, as one ringreduce job.')
    .option('-n, --np <count>', 'number of processes (ranks); -np works too; default: every slot of the hosts')
    .option('-H, --hosts <list>', 'hosts and slots, host[:slots],... (default: this machine); ranks fill them in order')
    .option('--hostfile <file>', "hosts from a file of 'host slots=N' lines")
    .option('--ssh-port <port>', 'port of the ssh server on the remote hosts')
    .option('--ssh-identity <file>', 'private key file for ssh (ssh -i)')
    .option('--ssh-command <command>', "the ssh-like program (and its arguments, split on spaces) to reach hosts; default 'ssh'")
    .option('-x, --env <NAME[=VALUE]>', 'pass this variable to every rank (repeatable); remote ranks get only these', collect)
    .option(
      '--network-interface <name>',
      'ranks bind to and advertise the address of this interface (RINGREDUCE_NETWORK_INTERFACE)',
    )
    .option('--address <address>', 'ranks bind to and advertise this address (one-host jobs; RINGREDUCE_ADDRESS)')
    .option('--store-port <port>', "rank 0's rendezvous store port (default: a free one)")
    .option('--backend <tcp|mpi>', 'tcp (default), or mpi: run the job with mpirun and the MPI backend')
    .option(
      '--start-timeout <duration>',
      'ranks start, rendezvous and connect within this (RINGREDUCE_START_TIMEOUT_MS, default 30s)',
    )
    .option(
      '--io-timeout <duration>',
      'a peer silent this long, or a read without progress, fails (RINGREDUCE_IO_TIMEOUT_MS, default 30s)',
    )
    .option(
      '--heartbeat <duration>',
      'ping interval to silent peers while collectives are pending; 0 disables (RINGREDUCE_HEARTBEAT_MS, default 2s)',
    )
    .option(
      '--stall-warning <duration>',
      'rank 0 logs who holds a collective up after this; 0 disables (RINGREDUCE_STALL_WARNING_MS, default 30s)',
    )
    .option(
      '--stall-timeout <duration>',
      'fail a collective that only some ranks submitted; 0 disables (RINGREDUCE_STALL_TIMEOUT_MS, default 60s)',
    )
    .option('--log-level <level>', `${kLogLevels.join(', ')} (RINGREDUCE_LOG_LEVEL, default warn)`)
    .option('--output-dir <dir>', "also write each rank's output to <dir>/rank.<rank>.log")
    .option('--verbose', 'print what ringrun does (ports, pids, start-up, exits, kills) on stderr')
    .option('--elastic', 'elastic training: a failed rank leaves, the others go on; new slots join (docs/elastic.md)')
    .option('--min-np <count>', 'elastic: the fewest ranks the job runs with (default: -np)')
    .option('--max-np <count>', 'elastic: the most ranks the job grows to (default: -np)')
    .option('--host-discovery-script <path>', 'elastic: prints the slots available, one host:slots line each')
    .option('--discovery-interval <duration>', 'elastic: how often the discovery script runs (default 1s)')
    .option('--elastic-timeout <duration>', 'elastic: how long the job may stay below --min-np before it fails (default 60s)')
    .option('--max-restarts <count>', 'not elastic: after a failure, start the whole job again, up to <count> times')
    .argument('[command...]', 'the program every rank runs, with its own arguments')
    .passThroughOptions()
    .addHelpText('after', kExamples)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => {
        out.text += text;
      },
      writeErr: () => {}, // errors are rethrown as InvalidArgumentError below
    });
}

/**
 * `-np` is what mpirun users type, but commander reads it as `-n p`. Rewrite it to `--np`,
 * only among ringrun's own options: a `-np` after the command belongs to the command.
 */
export function normaliseArgv(argv: readonly string[], valueFlags: ReadonlySet<string>): string[] {
  const result = [...argv];
  for (let i = 0; i < result.length; i++) {
    const arg = result[i] ?? '';
    if (arg === '--' || !arg.startsWith('-') || arg === '-') break; // the command starts here
    if (arg.startsWith('-np=')) result[i] = `-${arg}`;
    else if (arg === '-np')
      result[i++] = '--np'; // and skip its value
    else if (valueFlags.has(arg)) i++; // skip the flag's value
  }
  return result;
}

function valueFlagsOf(program: Command): Set<string> {
  const flags = new Set<string>();
  for (const option of program.options) {
    if (!option.required && !option.optional) continue;
    if (option.short !== undefined) flags.add(option.short);
    if (option.long !== undefined) flags.add(option.long);
  }
  return flags;
}

/** Parses ringrun's arguments (without `node` and the script). Throws InvalidArgumentError. */
export function parseArgs(
  argv: readonly string[],
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): ParsedArgs {
  const out = { text: '' };
  const program = buildProgram(out);
  try {
    program.parse(normaliseArgv(argv, valueFlagsOf(program)), { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError && error.code === 'commander.helpDisplayed') return { kind: 'help', text: out.text };
    if (error instanceof CommanderError) throw new InvalidArgumentError(error.message.replace(/^error: /, ''));
    throw error;
  }
  const opts = program.opts<Record<string, string | string[] | boolean | undefined>>();
  const raw = (name: string): string | undefined => {
    const value = opts[name];
    return typeof value === 'string' ? value : undefined;
  };
  /** A flag whose value must not be empty (a name, a path, an address). */
  const text = (name: string): string | undefined => {
    const value = raw(name);
    if (value === '')
      throw new InvalidArgumentError(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must not be empty`);
    return value;
  };
  const [command, ...args] = program.args;
  if (command === undefined || command === '') {
    throw new InvalidArgumentError('missing the command to run: ringrun -np <count> [options] <command> [args...]');
  }
  const hostList = text('hosts');
  const hostfile = text('hostfile');
  if (hostList !== undefined && hostfile !== undefined) throw new InvalidArgumentError('give -H or --hostfile, not both');
  let hosts: HostSlots[] | undefined;
  if (hostList !== undefined) hosts = parseHostList(hostList);
  if (hostfile !== undefined) {
    let content: string;
    try {
      content = readFile(hostfile);
    } catch (error) {
      throw new InvalidArgumentError(`--hostfile ${hostfile}: ${(error as Error).message}`);
    }
    hosts = parseHostfile(content, hostfile);
  }
  const npText = raw('np');
  if (npText === undefined && hosts === undefined)
    throw new InvalidArgumentError('missing -np <count>: how many processes to start');
  const np = npText === undefined ? (hosts ?? []).reduce((sum, h) => sum + h.slots, 0) : parseCount('-np', npText);
  const backend = text('backend') ?? 'tcp';
  if (backend !== 'tcp' && backend !== 'mpi') throw new InvalidArgumentError(`--backend must be tcp or mpi, got '${backend}'`);
  const address = text('address');
  const networkInterface = text('networkInterface');
  if (address !== undefined && networkInterface !== undefined) {
    throw new InvalidArgumentError('give --address or --network-interface, not both');
  }
  const sshCommand = (text('sshCommand') ?? 'ssh').split(/\s+/).filter((word) => word !== '');
  if (sshCommand.length === 0) throw new InvalidArgumentError('--ssh-command must name a program');
  const sshPort = text('sshPort');
  const sshIdentity = text('sshIdentity');
  const storePort = text('storePort');
  const elastic = parseElastic(opts.elastic === true, np, raw, text);
  const maxRestartsText = text('maxRestarts');
  const maxRestarts =
    maxRestartsText === undefined || maxRestartsText === '0' ? 0 : parseCount('--max-restarts', maxRestartsText);
  if (elastic !== undefined && maxRestarts > 0)
    throw new InvalidArgumentError('--max-restarts is for jobs that are not --elastic');
  if (elastic !== undefined && backend === 'mpi') throw new InvalidArgumentError('--elastic runs the TCP backend, not mpi');
  if (elastic !== undefined && hosts !== undefined)
    throw new InvalidArgumentError('--elastic runs on this machine only (no -H or --hostfile)');
  return {
    kind: 'launch',
    config: {
      np,
      hosts,
      hostfile,
      command,
      args,
      settings: parseSettings(raw),
      outputDir: text('outputDir'),
      verbose: opts.verbose === true,
      backend,
      ssh: {
        command: sshCommand,
        ...(sshPort !== undefined && { port: parsePort('--ssh-port', sshPort) }),
        ...(sshIdentity !== undefined && { identity: sshIdentity }),
      },
      env: ((opts.env as string[] | undefined) ?? []).map(parseEnvItem),
      networkInterface,
      address,
      storePort: storePort === undefined ? undefined : parsePort('--store-port', storePort),
      ...(elastic !== undefined && { elastic }),
      maxRestarts,
    },
  };
}

function parseElastic(
  on: boolean,
  np: number,
  raw: (name: string) => string | undefined,
  text: (name: string) => string | undefined,
): ElasticSettings | undefined {
  const elasticOnly = ['minNp', 'maxNp', 'hostDiscoveryScript', 'discoveryInterval', 'elasticTimeout'];
  if (!on) {
    const given = elasticOnly.find((name) => raw(name) !== undefined);
    if (given !== undefined)
      throw new InvalidArgumentError(`--${given.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --elastic`);
    return undefined;
  }
  const count = (name: string, flag: string) => {
    const value = text(name);
    return value === undefined ? np : parseCount(flag, value);
  };
  const duration = (name: string, flag: string, fallback: number) => {
    const value = text(name);
    return value === undefined ? fallback : parseDuration(flag, value, { allowZero: false });
  };
  return {
    minNp: count('minNp', '--min-np'),
    maxNp: count('maxNp', '--max-np'),
    discoveryScript: text('hostDiscoveryScript'),
    discoveryIntervalMs: duration('discoveryInterval', '--discovery-interval', 1000),
    timeoutMs: duration('elasticTimeout', '--elastic-timeout', 60_000),
  };
}

function parseSettings(text: (name: string) => string | undefined): EngineSettings {
  const settings: EngineSettings = {};
  const duration = (name: string, flag: string, allowZero: boolean) => {
    const value = text(name);
    return value === undefined ? undefined : parseDuration(flag, value, { allowZero });
  };
  const start = duration('startTimeout', '--start-timeout', false);
  const io = duration('ioTimeout', '--io-timeout', false);
  const heartbeat = duration('heartbeat', '--heartbeat', true);
  const warning = duration('stallWarning', '--stall-warning', true);
  const stall = duration('stallTimeout', '--stall-timeout', true);
  const level = text('logLevel');
  if (start !== undefined) settings.startTimeoutMs = start;
  if (io !== undefined) settings.ioTimeoutMs = io;
  if (heartbeat !== undefined) settings.heartbeatMs = heartbeat;
  if (warning !== undefined) settings.stallWarningMs = warning;
  if (stall !== undefined) settings.stallTimeoutMs = stall;
  if (level !== undefined) settings.logLevel = parseLogLevel('--log-level', level);
  return settings;
}

/** The ringrun program. Resolves to the exit code; bin/ringrun.js sets it. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  const stdout = guardedWriter(process.stdout);
  const stderr = guardedWriter(process.stderr);
  const log = (message: string): void => stderr(`ringrun: ${message}\n`);
  let parsed: ParsedArgs;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    log(error.message);
    log("see 'ringrun --help'");
    return 2;
  }
  if (parsed.kind === 'help') {
    stdout(parsed.text);
    return 0;
  }
  const verbose = parsed.config.verbose;
  const { elastic } = parsed.config;
  const once = parsed.config.backend === 'mpi' ? runMpi : runJob;
  const run =
    elastic !== undefined
      ? (config: LaunchConfig, io: RunIo) => runElastic(config, elastic, io)
      : (config: LaunchConfig, io: RunIo) =>
          withRestarts(config.maxRestarts, (attempt) => once(config, config.maxRestarts > 0 ? attemptIo(io, attempt) : io), io);
  return run(parsed.config, {
    env: process.env,
    cwd: process.cwd(),
    stderrIsTty: process.stderr.isTTY === true,
    stdout,
    stderr,
    log,
    debug: verbose ? log : () => {},
    onInterrupt(handler) {
      const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
      for (const signal of signals) process.on(signal, handler);
      return () => {
        for (const signal of signals) process.off(signal, handler);
      };
    },
  });
}

/**
 * Writes to stdout/stderr until the reader goes away (`ringrun ... | head`): then the output
 * is dropped, instead of an EPIPE crash that would leave the ranks running unwatched.
 */
function guardedWriter(stream: NodeJS.WriteStream): (text: string) => void {
  let broken = false;
  stream.on('error', () => {
    broken = true;
  });
  return (text) => {
    if (!broken) stream.write(text);
  };
}
