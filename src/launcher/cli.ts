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
import { parseBrowser } from './browser/browser_args.js';
import { checkBuild, versionText } from './check_build.js';
import { type DashboardAddress, parseDashboardAddress } from './dashboard/address.js';
import { withDashboard } from './dashboard/watch.js';
import type { ElasticSettings } from './elastic_driver.js';
import { runElastic } from './elastic_driver.js';
import { parseElasticNodes } from './elastic_nodes/args.js';
import { runElasticNodes } from './elastic_nodes/run.js';
import type { EngineSettings } from './env_contract.js';
import { type HostSlots, parseHostfile, parseHostList } from './hosts.js';
import type { LaunchConfig, RunIo } from './launch_config.js';
import { parsePerNode } from './node_args.js';
import { OrphanGuard } from './orphan_guard.js';
import { attemptIo, withRestarts } from './restarts.js';
import { runJob } from './run_job.js';
import { runMpi } from './run_mpi.js';
import { runNode } from './run_node.js';
import { parseTimelineFile } from './timeline_files.js';

export type { LaunchConfig } from './launch_config.js';
export type ParsedArgs =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'check-build' }
  | { kind: 'launch'; config: LaunchConfig; dashboard?: DashboardAddress };

const kExamples = `
Examples:
  ringrun -np 4 node train.js --epochs 10
  ringrun -np 8 -H node1:4,node2:4 node train.js
  ringrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --rdzv-endpoint node1:29400 node train.js   # on node1
  ringrun --nnodes 2 --node-rank 1 --nproc-per-node 4 --rdzv-endpoint node1:29400 node train.js   # on node2
  srun --ntasks-per-node=1 ringrun --slurm --nproc-per-node 4 node train.js
  ringrun --elastic --nnodes 2:4 --nproc-per-node 4 --rdzv-endpoint node1:29400 node train.js   # on each node
  ringrun -np 2 --timeline trace.json node train.js
  ringrun --hostfile hosts.txt --network-interface eth0 -x NODE_OPTIONS node train.js
  ringrun -np 2 --log-level debug --output-dir logs -- node bench.js
  ringrun -n 3 --start-timeout 2m --stall-timeout 0 sh -c 'node worker.js > /dev/null'

Options placed after <command> belong to the command; '--' also ends ringrun's options.
Durations carry a unit: 500ms, 30s, 1.5m, 2h (0 turns off what may be turned off). A bare
number is refused: it is seconds to horovodrun and milliseconds to RINGREDUCE_*_MS.
Each rank gets RINGREDUCE_RANK, RINGREDUCE_SIZE, RINGREDUCE_STORE_ADDR, RINGREDUCE_SECRET, ...
(docs/env.md); its output lines are prefixed with [rank]. Ranks on other hosts are started
with ssh (non-interactive: set up keys first); their environment travels over ssh's stdin,
never on a command line.

Per-node mode (--nnodes, --node-rank, --nproc-per-node, --rdzv-endpoint, --slurm): one
ringrun per node, as torchrun; node 0's hosts the rendezvous at the endpoint, and a failure on
any node stops the ranks of every node (docs/env.md, "One launcher per node"). With --elastic
and --nnodes MIN:MAX, nodes join and leave while the job runs (docs/elastic.md, "Per node").

Exit status: 0 when every rank exits 0; else the code of the rank that failed first (128+N
when killed by signal N; 127 when the command is not found; 1 when it exited with 0 before
calling init()); 124 when ranks did not start, call init() or connect within
--start-timeout; 130/143 when ringrun gets SIGINT/SIGTERM; 2 for a usage error.
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
      'a read or write without progress this long fails its peer (RINGREDUCE_IO_TIMEOUT_MS, default 30s)',
    )
    .option(
      '--heartbeat <duration>',
      'ping interval to silent peers while collectives are pending; a peer silent 4 intervals fails (8s by default); 0 disables (RINGREDUCE_HEARTBEAT_MS, default 2s)',
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
    .option('--tls', 'encrypt every TCP link between ranks and to the store, keyed from the job secret (RINGREDUCE_TLS)')
    .option('--output-dir <dir>', "also write each rank's output to <dir>/rank.<rank>.log")
    .option('--verbose', 'print what ringrun does (ports, pids, start-up, exits, kills) on stderr')
    .option('--elastic', 'elastic training: a failed rank leaves, the others go on; new slots join (docs/elastic.md)')
    .option('--min-np <count>', 'elastic: the fewest ranks the job runs with (default: -np)')
    .option('--max-np <count>', 'elastic: the most ranks the job grows to (default: -np)')
    .option('--host-discovery-script <path>', 'elastic: prints the slots available, one host:slots line each')
    .option('--discovery-interval <duration>', 'elastic: how often the discovery script runs (default 1s)')
    .option('--elastic-timeout <duration>', 'elastic: how long the job may stay below --min-np before it fails (default 60s)')
    .option('--max-restarts <count>', 'not elastic: after a failure, start the whole job again, up to <count> times')
    .option('--dashboard [host:port]', 'serve a live page of the job (default 127.0.0.1 and a free port; the URL is printed)')
    .option(
      '--nnodes <count>',
      "per-node mode: the number of nodes, one ringrun on each (default: Slurm's, else 1); with --elastic, MIN:MAX",
    )
    .option(
      '--node-rank <index>',
      "per-node mode: this node's index, 0 … nnodes-1; node 0 hosts the rendezvous (default: SLURM_NODEID)",
    )
    .option('--nproc-per-node <count>', 'per-node mode: the ranks this ringrun starts on its node (default 1)')
    .option(
      '--rdzv-endpoint <host:port>',
      "per-node mode: where node 0's ringrun hosts the rendezvous, reachable from every node (default under Slurm: the first node)",
    )
    .option('--rdzv-id <id>', 'elastic per-node mode: the job at the endpoint; every node gives the same (default none)')
    .option(
      '--rdzv-last-call <duration>',
      'elastic per-node mode: once --nnodes MIN are ready, how long the first round waits for more (default 1s)',
    )
    .option('--slurm', "per-node mode with the nodes, this node's index and the endpoint from Slurm (automatic in an srun step)")
    .option('--browser <count>', 'also run <count> browser ranks: web pages (tabs), ranks np … np+count-1 (docs/browser.md)')
    .option(
      '--headless',
      'open the browser ranks in headless Chromium (CHROME_PATH, or chromium on the PATH); else print the join URL',
    )
    .option('--browser-script <file>', "the program the browser ranks run (default: the Node ranks' script)")
    .option('--browser-host <host[:port]>', "where the browser ranks' page is served (default 127.0.0.1 and a free port)")
    .option('--https-cert <file>', 'serve the browser ranks over https with this certificate (PEM), for pages on other machines')
    .option('--https-key <file>', "the --https-cert certificate's private key (PEM)")
    .option('--timeline <file>', "write one trace of every rank's engine to <file> (Chrome trace format: open it in Perfetto)")
    .option('--check-build', 'say which backends work here (the MPI addon: built? loads? why not?) and exit')
    .option('--version', "print ringrun's version and exit")
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
export function normaliseArgv(
  argv: readonly string[],
  valueFlags: ReadonlySet<string>,
  /** Those of valueFlags whose value may be left out (--dashboard): then the next word is not theirs. */
  optionalValueFlags: ReadonlySet<string> = new Set(),
): string[] {
  const result = [...argv];
  for (let i = 0; i < result.length; i++) {
    const arg = result[i] ?? '';
    if (arg === '--' || !arg.startsWith('-') || arg === '-') break; // the command starts here
    if (arg.startsWith('-np=')) result[i] = `-${arg}`;
    else if (arg === '-np')
      result[i++] = '--np'; // and skip its value
    else if (valueFlags.has(arg) && !(optionalValueFlags.has(arg) && (result[i + 1] ?? '').startsWith('-'))) i++; // skip the flag's value
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

/**
 * Parses ringrun's arguments (without `node` and the script). Throws InvalidArgumentError.
 * `env`: for the per-node mode's Slurm defaults.
 */
export function parseArgs(
  argv: readonly string[],
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
  env: Readonly<Record<string, string | undefined>> = process.env,
): ParsedArgs {
  const out = { text: '' };
  const program = buildProgram(out);
  try {
    const optional = new Set(program.options.filter((option) => option.optional).map((option) => option.long as string));
    program.parse(normaliseArgv(argv, valueFlagsOf(program), optional), { from: 'user' });
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
  if (opts.version === true) return { kind: 'version' };
  if (opts.checkBuild === true) return { kind: 'check-build' };
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
  const browser = parseBrowser(text, opts.headless === true, command, args);
  const elasticNodes =
    opts.elastic === true ? parseElasticNodes(text, elasticTimeout(text) ?? kDefaultElasticTimeoutMs) : undefined;
  const perNode = elasticNodes === undefined ? parsePerNode(text, opts.slurm === true, env) : undefined;
  if (perNode !== undefined || elasticNodes !== undefined) checkPerNode(raw, hosts !== undefined);
  if (elasticNodes !== undefined && opts.slurm === true)
    throw new InvalidArgumentError('--slurm is for the fixed per-node mode; the elastic one takes --rdzv-endpoint');
  if (npText === undefined && hosts === undefined && perNode === undefined && elasticNodes === undefined)
    throw new InvalidArgumentError('missing -np <count>: how many processes to start');
  const np =
    elasticNodes !== undefined
      ? elasticNodes.maxNodes * elasticNodes.nprocPerNode
      : perNode !== undefined
        ? perNode.nnodes * perNode.nprocPerNode
        : npText === undefined
          ? (hosts ?? []).reduce((sum, h) => sum + h.slots, 0)
          : parseCount('-np', npText, { allowZero: browser !== undefined });
  const backend = text('backend') ?? 'tcp';
  if (backend !== 'tcp' && backend !== 'mpi') throw new InvalidArgumentError(`--backend must be tcp or mpi, got '${backend}'`);
  if (opts.tls === true && backend === 'mpi')
    throw new InvalidArgumentError('--tls applies to the tcp backend; MPI has its own links');
  if (opts.tls === true && browser !== undefined) {
    throw new InvalidArgumentError(
      '--tls does not cover browser ranks (the web backend): serve their page over https (--https-cert)',
    );
  }
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
  const elastic = elasticNodes === undefined ? parseElastic(opts.elastic === true, np, raw, text) : undefined;
  const timelineFile = text('timeline');
  const maxRestartsText = text('maxRestarts');
  const maxRestarts =
    maxRestartsText === undefined || maxRestartsText === '0' ? 0 : parseCount('--max-restarts', maxRestartsText);
  if (elastic !== undefined && maxRestarts > 0)
    throw new InvalidArgumentError('--max-restarts is for jobs that are not --elastic');
  if (elastic !== undefined && backend === 'mpi') throw new InvalidArgumentError('--elastic runs the TCP backend, not mpi');
  if (elastic?.discoveryScript !== undefined && hosts !== undefined)
    throw new InvalidArgumentError('--host-discovery-script lists the hosts: give it or -H/--hostfile, not both');
  if (elastic !== undefined && perNode !== undefined)
    throw new InvalidArgumentError('--elastic per node takes --nnodes MIN:MAX and --rdzv-endpoint, not --slurm');
  if (browser !== undefined)
    checkBrowser({ backend, hosts: hosts !== undefined, perNode: perNode !== undefined || elasticNodes !== undefined });
  return {
    kind: 'launch',
    ...(opts.dashboard !== undefined && { dashboard: parseDashboardAddress(opts.dashboard as string | true) }),
    config: {
      np,
      hosts,
      hostfile,
      command,
      args,
      settings: parseSettings(raw, opts.tls === true),
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
      timeline: timelineFile === undefined ? undefined : parseTimelineFile(timelineFile),
      perNode,
      ...(elasticNodes !== undefined && { elasticNodes }),
      ...(browser !== undefined && { browser }),
    },
  };
}

/** What browser ranks do not run with yet, refused by name. */
function checkBrowser(job: { backend: string; hosts: boolean; perNode: boolean }): void {
  if (job.backend === 'mpi') throw new InvalidArgumentError('--browser runs the web backend, not mpi (browsers have no MPI)');
  if (job.hosts) throw new InvalidArgumentError('--browser runs its Node ranks on this machine (no -H or --hostfile)');
  if (job.perNode) throw new InvalidArgumentError('--browser runs with one ringrun, not per node');
}

/** The flags that mean nothing in the per-node mode, refused by name. */
function checkPerNode(raw: (name: string) => string | undefined, hosts: boolean): void {
  if (raw('np') !== undefined)
    throw new InvalidArgumentError('give -np or the per-node flags (--nproc-per-node on each node), not both');
  if (hosts)
    throw new InvalidArgumentError(
      '-H and --hostfile are for one ringrun for the whole job; the per-node mode runs one per node',
    );
  const refused: [string, string][] = [
    ['backend', '--backend'],
    ['address', '--address'],
    ['sshCommand', '--ssh-command'],
    ['sshPort', '--ssh-port'],
    ['sshIdentity', '--ssh-identity'],
    ['maxRestarts', '--max-restarts'],
  ];
  for (const [name, flag] of refused) {
    if (raw(name) !== undefined) throw new InvalidArgumentError(`${flag} does not apply to the per-node mode (--nnodes ...)`);
  }
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
    timeoutMs: elasticTimeout(text) ?? kDefaultElasticTimeoutMs,
  };
}

const kDefaultElasticTimeoutMs = 60_000;

function elasticTimeout(text: (name: string) => string | undefined): number | undefined {
  const value = text('elasticTimeout');
  return value === undefined ? undefined : parseDuration('--elastic-timeout', value, { allowZero: false });
}

function parseSettings(text: (name: string) => string | undefined, tls: boolean): EngineSettings {
  const settings: EngineSettings = tls ? { tls } : {};
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
  if (parsed.kind === 'version') {
    stdout(versionText());
    return 0;
  }
  if (parsed.kind === 'check-build') {
    stdout(checkBuild());
    return 0;
  }
  const verbose = parsed.config.verbose;
  const { elastic, elasticNodes } = parsed.config;
  const once = parsed.config.perNode !== undefined ? runNode : parsed.config.backend === 'mpi' ? runMpi : runJob;
  const run =
    elasticNodes !== undefined
      ? (config: LaunchConfig, io: RunIo) => runElasticNodes(config, elasticNodes, io)
      : elastic !== undefined
        ? (config: LaunchConfig, io: RunIo) => runElastic(config, elastic, io)
        : (config: LaunchConfig, io: RunIo) =>
            withRestarts(config.maxRestarts, (attempt) => once(config, config.maxRestarts > 0 ? attemptIo(io, attempt) : io), io);
  const guard = new OrphanGuard();
  try {
    return await (parsed.dashboard ? withDashboard(parsed.dashboard, run) : run)(parsed.config, {
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
      guard,
    });
  } finally {
    guard.close();
  }
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
