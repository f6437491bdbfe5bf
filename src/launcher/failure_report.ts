import { constants } from 'node:os';
import type { RankExit } from './rank_process.js';

/** The shell's convention for "ended by signal N". */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** "exited with code 3", "was killed by SIGSEGV", "could not be started: ...". */
export function describeExit(exit: RankExit): string {
  if (exit.spawnError !== undefined) return `could not be started: ${exit.spawnError.message}`;
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
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

/** The lines ringrun prints (after `ringrun: `) to explain a failed job. */
export function failureReport(exit: RankExit, lastLines: readonly string[]): string[] {
  const pid = exit.pid === undefined ? '' : ` (pid ${exit.pid})`;
  const report = [`job failed: rank ${exit.rank}${pid} ${describeExit(exit)}`];
  if (lastLines.length > 0) {
    report.push(`last ${lastLines.length} lines of rank ${exit.rank}:`);
    for (const line of lastLines) report.push(`  [${exit.rank}] ${line}`);
  } else if (exit.spawnError === undefined) {
    report.push(`rank ${exit.rank} printed nothing`);
  }
  return report;
}
