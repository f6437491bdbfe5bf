/**
 * The `ringrun` command line: `ringrun -np N [options] <command> [args...]`. Parsing is pure
 * (parseArgs); main() wires the parsed job to the process (signals, stdout, exit code).
 */
import { Command, CommanderError } from 'commander';
import { InvalidArgumentError } from '../api/errors.js';
import { parseCount, parseDuration, parseLogLevel } from './arg_values.js';
import type { EngineSettings } from './env_contract.js';
import { runLocal } from './run_local.js';

/** Everything a local job needs, validated. */
export interface LaunchConfig {
  np: number;
  command: string;
  args: string[];
  settings: EngineSettings;
  outputDir: string | undefined;
  verbose: boolean;
}

export type ParsedArgs = { kind: 'help'; text: string } | { kind: 'launch'; config: LaunchConfig };

const kExamples = `
Examples:
  ringrun -np 4 node train.js --epochs 10
  ringrun -np 2 --log-level debug --output-dir logs -- node bench.js
  ringrun -n 3 --start-timeout 2m --stall-timeout 0 sh -c 'node worker.js > /dev/null'

Options placed after <command> belong to the command; '--' also ends ringrun's options.
Durations are milliseconds (30000) or carry a unit (500ms, 30s, 2m).
Each rank gets RINGREDUCE_RANK, RINGREDUCE_SIZE, RINGREDUCE_STORE_ADDR, ... (docs/env.md);
its output lines are prefixed with [rank].

Exit status: 0 when every rank exits 0; else the first failed rank's code (128+N when
killed by signal N; 127 when the command is not found); 130/143 when ringrun gets
SIGINT/SIGTERM; 2 for a usage error.
`;

function buildProgram(out: { text: string }): Command {
  return new Command('ringrun')
    .usage('-np <count> [options] <command> [args...]')
    .description('Start <count> processes of <command> on this machine as one ringreduce job.')
    .option('-n, --np <count>', 'number of processes (ranks) to start; -np works too')
    .option('--start-timeout <duration>', 'rendezvous and connect deadline (RINGREDUCE_START_TIMEOUT_MS, default 30s)')
    .option('--io-timeout <duration>', 'longest network read without progress (RINGREDUCE_IO_TIMEOUT_MS, default 30s)')
    .option(
      '--stall-timeout <duration>',
      'fail a collective that only some ranks submitted; 0 disables (RINGREDUCE_STALL_TIMEOUT_MS, default 60s)',
    )
    .option('--log-level <level>', 'error, warn, info or debug (RINGREDUCE_LOG_LEVEL, default warn)')
    .option('--output-dir <dir>', "also write each rank's output to <dir>/rank.<rank>.log")
    .option('--verbose', 'print what ringrun does (ports, pids, exits, kills) on stderr')
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
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const out = { text: '' };
  const program = buildProgram(out);
  try {
    program.parse(normaliseArgv(argv, valueFlagsOf(program)), { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError && error.code === 'commander.helpDisplayed') return { kind: 'help', text: out.text };
    if (error instanceof CommanderError) throw new InvalidArgumentError(error.message.replace(/^error: /, ''));
    throw error;
  }
  const opts = program.opts<Record<string, string | boolean | undefined>>();
  const text = (name: string): string | undefined => (typeof opts[name] === 'string' ? opts[name] : undefined);
  const np = text('np');
  if (np === undefined) throw new InvalidArgumentError('missing -np <count>: how many processes to start');
  const [command, ...args] = program.args;
  if (command === undefined || command === '') {
    throw new InvalidArgumentError('missing the command to run: ringrun -np <count> [options] <command> [args...]');
  }
  const settings: EngineSettings = {};
  const start = text('startTimeout');
  const io = text('ioTimeout');
  const stall = text('stallTimeout');
  const level = text('logLevel');
  if (start !== undefined) settings.startTimeoutMs = parseDuration('--start-timeout', start, { allowZero: false });
  if (io !== undefined) settings.ioTimeoutMs = parseDuration('--io-timeout', io, { allowZero: false });
  if (stall !== undefined) settings.stallTimeoutMs = parseDuration('--stall-timeout', stall, { allowZero: true });
  if (level !== undefined) settings.logLevel = parseLogLevel('--log-level', level);
  const outputDir = text('outputDir');
  if (outputDir === '') throw new InvalidArgumentError('--output-dir must not be empty');
  return {
    kind: 'launch',
    config: { np: parseCount('-np', np), command, args, settings, outputDir, verbose: opts.verbose === true },
  };
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
  return runLocal(parsed.config, {
    env: process.env,
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
