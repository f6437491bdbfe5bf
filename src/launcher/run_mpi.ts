/**
 * `ringrun --backend mpi`: hands the job to Open MPI's mpirun, which starts the ranks and gives
 * them OMPI_COMM_WORLD_*; the ranks use the MPI backend (RINGREDUCE_BACKEND=mpi). ringrun only
 * builds the command line, passes the settings with `-x NAME` (names only: values travel in
 * mpirun's environment, never on its command line), forwards interrupts and returns mpirun's
 * exit status. Output reads as with the TCP backend: mpirun tags each rank's lines
 * (--tag-output, `[1,3]<stdout>:`) and ringrun writes them as `[3] `; mpirun gives the ranks a
 * pseudo-terminal for stdout, so they are asked not to colour it (NO_COLOR), unless the user's
 * environment chose (NO_COLOR, FORCE_COLOR, NODE_DISABLE_COLORS).
 */
import { spawn } from 'node:child_process';
import { kEnv, newJobId, settingsEnv } from './env_contract.js';
import { signalExitCode } from './failure_report.js';
import type { LaunchConfig, RunIo } from './launch_config.js';
import { OutputPrefixer, rankPrefix } from './output_prefixer.js';
import { signalGroup } from './process_group.js';

const kKillGraceMs = 3000;
/** What mpirun --tag-output puts before a rank's line: `[<job>,<rank>]<stdout>:` (or `<stderr>`). */
const kMpiTag = /^\[\d+,(\d+)\]<std(?:out|err)>:/gm;
/** The variables by which a user chooses colours; when none is set, the ranks get NO_COLOR. */
const kColourChoices = ['NO_COLOR', 'FORCE_COLOR', 'NODE_DISABLE_COLORS'];

/** Complete lines of mpirun's output with each rank's tag written as ringrun's `[rank] ` prefix; mpirun's own lines as they are. */
export function retagMpiOutput(lines: string): string {
  return lines.replace(kMpiTag, (_tag, rank: string) => rankPrefix(Number(rank)));
}

/** mpirun's argv (without the program) and the variables it must forward. */
export function mpirunArgv(config: LaunchConfig, names: readonly string[]): string[] {
  const argv = ['--allow-run-as-root', '--bind-to', 'none', '--tag-output', '-np', String(config.np)];
  if (config.hostfile !== undefined) argv.push('--hostfile', config.hostfile);
  else if (config.hosts !== undefined) argv.push('-H', config.hosts.map((h) => `${h.host}:${h.slots}`).join(','));
  // A local job may have more ranks than cores, as with the TCP backend (mpirun refuses by
  // default and, oversubscribed, makes idle ranks yield instead of spin).
  else argv.push('--oversubscribe');
  if (config.networkInterface !== undefined) argv.push('--mca', 'btl_tcp_if_include', config.networkInterface);
  for (const name of names) argv.push('-x', name);
  argv.push(config.command, ...config.args);
  return argv;
}

export function runMpi(config: LaunchConfig, io: RunIo): Promise<number> {
  const env: Record<string, string> = { [kEnv.backend]: 'mpi', [kEnv.jobId]: newJobId(), ...settingsEnv(config.settings) };
  if (kColourChoices.every((name) => io.env[name] === undefined)) env.NO_COLOR = '1';
  for (const { name, value } of config.env) {
    const resolved = value ?? io.env[name];
    if (resolved !== undefined) env[name] = resolved;
  }
  const argv = mpirunArgv(config, Object.keys(env));
  io.debug(`mpirun ${argv.join(' ')}`);
  return new Promise((resolve) => {
    const child = spawn('mpirun', argv, { env: { ...io.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const pid = child.pid;
    if (pid !== undefined) {
      io.guard?.watch(pid, 'mpirun');
      child.once('exit', () => io.guard?.unwatch(pid));
    }
    // Whole lines only, so a tag cut between two chunks is still found.
    const stdout = new OutputPrefixer('', (text) => io.stdout(retagMpiOutput(text)));
    const stderr = new OutputPrefixer('', (text) => io.stderr(retagMpiOutput(text)));
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    let interrupted: NodeJS.Signals | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const unsubscribe = io.onInterrupt((signal) => {
      if (child.pid === undefined) return;
      if (interrupted !== undefined) {
        signalGroup(child.pid, 'SIGKILL');
        return;
      }
      interrupted = signal;
      io.log(`received ${signal}: stopping mpirun`);
      signalGroup(child.pid, 'SIGTERM');
      killTimer = setTimeout(() => child.pid !== undefined && signalGroup(child.pid, 'SIGKILL'), kKillGraceMs);
    });
    const finish = (code: number) => {
      clearTimeout(killTimer);
      unsubscribe();
      resolve(code);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      io.log(`cannot run mpirun: ${error.message}${error.code === 'ENOENT' ? ' (is Open MPI installed?)' : ''}`);
      finish(error.code === 'ENOENT' ? 127 : 1);
    });
    child.once('close', (code, signal) => {
      stdout.end();
      stderr.end();
      if (interrupted !== undefined) finish(signalExitCode(interrupted));
      else if (signal !== null) finish(signalExitCode(signal));
      else finish(code ?? 1);
    });
  });
}
