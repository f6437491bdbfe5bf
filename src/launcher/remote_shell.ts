/**
 * Starting a rank on another host over ssh, without its secret on any command line.
 *
 * How it works: the ssh command line carries only a fixed bootstrap script (BOOTSTRAP, the
 * same for every rank and job). Everything else travels on the session's stdin, which ringrun
 * keeps open for the rank's whole life:
 *
 *   <marker>                       a random line, new for each job
 *   export NAME='value'            the environment contract (the secret included) and -x vars
 *   cd '/launch/dir' || <warn>     the launcher's working directory, when it exists there
 *   set -- 'node' 'train.js' ...   the command
 *   <marker>
 *
 * The bootstrap reads and evaluates those lines, prints the marker on stdout (ringrun's "this
 * rank started"; ringrun removes the line), starts the command in a new session (setsid, so
 * that its whole process group can be signalled) with stdin from /dev/null, and exits with its
 * exit status (128+N when signal N killed it). A watcher waits for EOF on the session's stdin:
 * when ringrun ends it (to stop the rank), dies or loses the connection, the watcher sends
 * SIGTERM (and SIGCONT, for a stopped rank) to the rank's group, then SIGKILL 2 s later. So
 * no rank outlives its launcher, even where ssh does not forward signals.
 *
 * Each line is one shell command, so a value with a line break travels escaped and is rebuilt
 * there with printf %b (see `assign`). No value can hold NUL (neither can argv or environ).
 */
import { basename } from 'node:path';
import { InvalidArgumentError } from '../core/errors.js';

/** One line, no single quotes: it is wrapped in single quotes for the remote login shell. */
const kBootstrap = [
  'IFS= read -r M || exit 97',
  'while IFS= read -r L; do [ "$L" = "$M" ] && break; eval "$L" || exit 96; done',
  '[ $# -gt 0 ] || exit 96',
  'exec 3<&0',
  'echo "$M"',
  'if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null & else "$@" </dev/null & fi',
  'P=$!',
  // (A list ends in '&' where others end in ';': this item carries the next command.)
  // (kill -SIG -pgid: dash refuses `kill -SIG -- -pgid`.)
  // The watcher: at EOF, TERM (and CONT) to the rank's group, KILL 2 s later; it leaves at once
  // when nothing is left to stop.
  '(cat <&3 >/dev/null 2>&1; kill -TERM -$P 2>/dev/null || kill -TERM $P 2>/dev/null || exit 0; kill -CONT -$P 2>/dev/null;' +
    ' for i in 1 2; do sleep 1; kill -0 -$P 2>/dev/null || kill -0 $P 2>/dev/null || exit 0; done;' +
    ' kill -KILL -$P 2>/dev/null || kill -KILL $P 2>/dev/null) >/dev/null 2>&1 & exec 3<&-',
  'wait $P 2>/dev/null', // no "Terminated" from the shell: ringrun reports the exit
  'exit $?',
].join('; ');

export const kRemoteCommand = `sh -c '${kBootstrap}'`;

export interface SshOptions {
  /** The ssh program and its own arguments, e.g. ['ssh'] or ['ssh', '-F', 'cfg'] (--ssh-command). */
  command: readonly string[];
  port?: number;
  identity?: string;
  /** Seconds ssh may take to connect (its ConnectTimeout). */
  connectTimeoutS: number;
}

/** POSIX single quoting: the value exactly, whatever it contains (but newline and NUL). */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}

/** The argv that starts one remote rank: `ssh [options] host 'sh -c <bootstrap>'`. */
export function sshArgv(ssh: SshOptions, host: string): string[] {
  const [program = 'ssh', ...own] = ssh.command;
  const argv = [program, ...own];
  // Options only OpenSSH knows; a substitute command gets -p and -i only if asked for.
  if (basename(program) === 'ssh') {
    argv.push('-T', '-o', 'BatchMode=yes', '-o', `ConnectTimeout=${ssh.connectTimeoutS}`);
    argv.push('-o', 'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=3');
  }
  if (ssh.port !== undefined) argv.push('-p', String(ssh.port));
  if (ssh.identity !== undefined) argv.push('-i', ssh.identity);
  argv.push(host, kRemoteCommand);
  return argv;
}

const kName = /^[A-Za-z_][A-Za-z0-9_]*$/;
const kLineBreak = /[\n\r]/;

/**
 * Lines that set shell variable `name` to `value`: one quoted assignment, or, for a value with
 * line breaks, printf %b of the value with backslashes, CR and LF escaped (a trailing `_`,
 * removed after, keeps the trailing newlines that $(...) would strip).
 */
function assign(name: string, value: string): string[] {
  if (!kLineBreak.test(value)) return [`${name}=${shellQuote(value)}`];
  const escaped = value.replaceAll('\\', '\\\\').replaceAll('\n', '\\n').replaceAll('\r', '\\r');
  return [`${name}="$(printf '%b_' ${shellQuote(escaped)})"`, `${name}="\${${name}%_}"`];
}

/** The stdin script of one remote rank (see above), ending with the marker line. */
export function remoteScript(
  marker: string,
  env: Readonly<Record<string, string>>,
  cwd: string | undefined,
  command: string,
  args: readonly string[],
): string {
  const lines = [marker];
  for (const [name, value] of Object.entries(env)) {
    if (!kName.test(name))
      throw new InvalidArgumentError(`cannot send the variable '${name}' to a remote host: not a shell name`);
    lines.push(...assign(name, value), `export ${name}`);
  }
  if (cwd !== undefined && !kLineBreak.test(cwd)) {
    const dir = shellQuote(cwd);
    lines.push(
      `cd ${dir} 2>/dev/null || printf 'ringrun: no directory %s on %s; running in %s\\n' ${dir} "$(hostname)" "$PWD" >&2`,
    );
  }
  const words = [command, ...args].map((word, i) => {
    if (!kLineBreak.test(word)) return shellQuote(word);
    lines.push(...assign(`RINGRUN_ARG${i}`, word));
    return `"$RINGRUN_ARG${i}"`;
  });
  lines.push(`set -- ${words.join(' ')}`, marker);
  return `${lines.join('\n')}\n`;
}
