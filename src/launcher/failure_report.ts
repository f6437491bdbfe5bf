import { constants } from 'node:os';
import type { FailedRank } from './failure_cause.js';
import type { RankExit } from './rank_process.js';
import type { LateRank } from './start_up.js';

/** The shell's convention for "ended by signal N". */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** "exited with code 3", "was killed by SIGSEGV", "could not be started: ...", "on host b ...". */
export function describeExit(exit: RankExit): string {
  if (exit.spawnError !== undefined) return `could not be started: ${exit.spawnError.message}${scriptHint(exit.spawnError)}`;
  if (exit.reason !== undefined) return exit.reason;
  if (exit.host === undefined) return exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
  // A remote rank's status comes through its ssh session.
  if (exit.signal !== null) return `on ${exit.host}: its ssh session was killed by ${exit.signal}`;
  const signal = exit.code !== null && exit.code > 128 && exit.code < 128 + 65 ? signalName(exit.code - 128) : undefined;
  if (signal !== undefined) return `on ${exit.host} was killed by ${signal} (exit status ${exit.code})`;
  if (exit.code === 255)
    return `on ${exit.host} exited with code 255: ssh failed (host unreachable, refused, or the connection broke)`;
  return `on ${exit.host} exited with code ${exit.code}`;
}

/**
 * A JavaScript or TypeScript file given as the command (`ringrun -np 2 train.js`): not found on
 * the PATH, or not executable. mpirun users pass `python train.py`; the same holds here.
 */
function scriptHint(error: NodeJS.ErrnoException): string {
  const path = error.path;
  if (path === undefined || (error.code !== 'ENOENT' && error.code !== 'EACCES')) return '';
  if (/\.[cm]?js$/.test(path)) return ` (${path} is a script: start it with node, as in 'ringrun -np N node ${path}')`;
  if (/\.[cm]?ts$/.test(path))
    return ` (${path} is TypeScript: compile it, e.g. with npx tsc, and start the .js with node, as in 'ringrun -np N node ${path.replace(/ts$/, 'js')}')`;
  return '';
}

function signalName(signal: number): string | undefined {
  return Object.entries(constants.signals).find(([, number]) => number === signal)?.[0];
}

export function failed(exit: RankExit): boolean {
  return exit.spawnError !== undefined || exit.signal !== null || exit.code !== 0;
}

/** ringrun's exit code for a job that failed because of `exit`: the rank's own, as mpirun does. */
export function failureExitCode(exit: RankExit): number {
  if (exit.spawnError !== undefined) {
    // The shell's codes for "not found" and "not executable".
    if (exit.spawnError.code === 'ENOENT') return 127;
    if (exit.spawnError.code === 'EACCES') return 126;
    return 1;
  }
  if (exit.signal !== null) return signalExitCode(exit.signal);
  return exit.code === null || exit.code === 0 ? 1 : exit.code;
}

/** "rank 2 did not call init() and ranks 0, 1 did not finish connecting": the late ranks, by step. */
export function lateRanksText(ranks: readonly { rank: number; why?: LateRank['why'] }[]): string {
  const byWhy = new Map<string, number[]>();
  for (const { rank, why } of ranks) byWhy.set(why ?? 'did not start', [...(byWhy.get(why ?? 'did not start') ?? []), rank]);
  return [...byWhy].map(([why, list]) => `${list.length === 1 ? 'rank' : 'ranks'} ${list.join(', ')} ${why}`).join(' and ');
}

/** The lines ringrun prints (after `ringrun: `) when ranks did not start, call init() or connect in time. */
export function notStartedReport(
  ranks: readonly { rank: number; host: string | undefined; lastLines: readonly string[]; why?: LateRank['why'] }[],
  startTimeoutMs: number,
): string[] {
  const report = [`job failed: ${lateRanksText(ranks)} within ${startTimeoutMs} ms`];
  for (const { rank, host, lastLines } of ranks) {
    const where = host === undefined ? '' : ` on ${host}`;
    if (lastLines.length === 0) report.push(`rank ${rank}${where} printed nothing`);
    else {
      report.push(`last ${lastLines.length} lines of rank ${rank}${where}:`);
      for (const line of lastLines) report.push(`  [${rank}] ${line}`);
    }
  }
  return report;
}

/**
 * The lines ringrun prints (after `ringrun: `) to explain a failed job: the rank, how it ended,
 * the error it printed (rank_error.ts) and its last lines, up to that error's first frames.
 */
export function failureReport(failure: FailedRank): string[] {
  const { exit, lastLines, error } = failure;
  const pid = exit.pid === undefined ? '' : ` (pid ${exit.pid})`;
  const oom = error?.outOfMemory === true ? ': it ran out of memory' : '';
  const report = [`job failed: rank ${exit.rank}${pid} ${describeExit(exit)}${failure.note ?? ''}${oom}`];
  if (error !== undefined) report.push(`error of rank ${exit.rank}: ${error.summary}`);
  if (lastLines.length > 0) {
    const upTo = error === undefined ? '' : ', up to its error';
    report.push(`last ${lastLines.length} lines of rank ${exit.rank}${upTo}:`);
    for (const line of lastLines) report.push(`  [${exit.rank}] ${line}`);
  } else if (exit.spawnError === undefined) {
    report.push(`rank ${exit.rank} printed nothing`);
  }
  return report;
}
