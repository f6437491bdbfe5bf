/**
 * Runs a fixture as a real MPI job, `mpirun -np N node <fixture>`, for the MPI backend's tests.
 * Fixtures print one `MPI-REPORT {json}` line per rank; the result collects them.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mpiAddonPath } from '../../src/transport/mpi/loader.js';

export const kReportPrefix = 'MPI-REPORT ';

/** Why the MPI tests cannot run here, or undefined when they can. */
export function mpiSkipReason(): string | undefined {
  if (!existsSync(mpiAddonPath())) {
    return `the MPI addon is not built (${mpiAddonPath()}): install openmpi-bin and libopenmpi-dev, then run node scripts/build-native.mjs`;
  }
  if (spawnSync('mpirun', ['--version'], { stdio: 'ignore' }).status !== 0) return 'mpirun is not on PATH (install openmpi-bin)';
  return undefined;
}

export interface MpiRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The MPI-REPORT lines, parsed, sorted by their `rank`. */
  reports: Array<Record<string, unknown> & { rank: number }>;
  elapsedMs: number;
}

/** The compiled fixture `dist/test/multiprocess/fixtures/<name>.js`. */
export function fixturePath(name: string): string {
  return fileURLToPath(new URL(`../multiprocess/fixtures/${name}.js`, import.meta.url));
}

/** The environment without the RINGREDUCE_* of the machine running the tests. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RINGREDUCE_')));
  return { ...env, ...extra };
}

/**
 * `mpirun --allow-run-as-root --oversubscribe --bind-to none -np <np> node <fixture> ...args`.
 * The whole job is killed (process group) when it runs past `timeoutMs`.
 */
export function mpirun(
  np: number,
  fixture: string,
  options: { args?: string[]; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<MpiRun> {
  const started = performance.now();
  const args = ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '-np', String(np)];
  args.push(process.execPath, fixturePath(fixture), ...(options.args ?? []));
  const child = spawn('mpirun', args, {
    env: cleanEnv({ RINGREDUCE_BACKEND: 'mpi', ...options.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => {
    stderr += `\n[mpi_run] killed after ${options.timeoutMs ?? 120_000} ms\n`;
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {}
  }, options.timeoutMs ?? 120_000);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const reports = stdout
        .split('\n')
        .filter((line) => line.startsWith(kReportPrefix))
        .map((line) => JSON.parse(line.slice(kReportPrefix.length)) as MpiRun['reports'][number])
        .sort((a, b) => a.rank - b.rank);
      resolve({ code, signal, stdout, stderr, reports, elapsedMs: performance.now() - started });
    });
  });
}

/** For assertion messages: what the job printed. */
export function describeRun(run: MpiRun): string {
  return `exit ${run.code ?? run.signal} after ${Math.round(run.elapsedMs)} ms\n--- stdout\n${run.stdout.slice(-4000)}\n--- stderr\n${run.stderr.slice(-4000)}`;
}
