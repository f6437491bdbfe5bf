/**
 * `ringrun --version` and `ringrun --check-build`: what this installation can run. The MPI
 * addon is optional and built at install time only where MPI is found; package managers that
 * skip install scripts (pnpm, Bun) leave it unbuilt without a word, so this says which
 * backends work, and for MPI why not and how to fix it.
 */
import { spawnSync } from 'node:child_process';
import { kVersion } from '../core/version.js';
import { loadMpiBinding, mpiAddonPath } from '../transport/mpi/loader.js';

export function versionText(): string {
  return `ringrun ${kVersion} (ringreduce, Node ${process.version})\n`;
}

/** The first line `program --version` prints, or undefined when it cannot run. */
function programVersion(program: string): string | undefined {
  const probe = spawnSync(program, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error !== undefined || probe.status !== 0) return undefined;
  return `${probe.stdout ?? ''}${probe.stderr ?? ''}`.trim().split('\n')[0];
}

/** The report (ringrun exits 0 after it: TCP always works; the report says what does not). */
export function checkBuild(): string {
  const lines = [`ringreduce ${kVersion}, Node ${process.version} (${process.platform} ${process.arch})`, 'backends:'];
  lines.push('  tcp   available (the default: any number of ranks, on one host or several)');
  lines.push('  solo  available (a job of one rank)');
  let mpiOk = false;
  try {
    loadMpiBinding();
    mpiOk = true;
    lines.push(`  mpi   available: the MPI addon is built and loads (${mpiAddonPath()})`);
  } catch (error) {
    lines.push(`  mpi   not available: ${(error as Error).message}`);
  }
  const mpirun = programVersion('mpirun');
  const mpicc = programVersion(process.env.MPICC ?? 'mpicc');
  lines.push(`mpirun: ${mpirun ?? 'not found (ringrun --backend mpi and jobs under mpirun need it)'}`);
  lines.push(
    `mpicc: ${mpicc === undefined ? 'not found (building the MPI addon needs MPI with its development files)' : `found (${mpicc})`}`,
  );
  if (!mpiOk && mpicc !== undefined) {
    lines.push(
      'MPI is installed: build the addon with `npm rebuild ringreduce` (npm 11 and later run it once allowed: ' +
        '`npm install-scripts approve ringreduce` first; in a checkout: node scripts/build-native.mjs --verbose)',
    );
  }
  return `${lines.join('\n')}\n`;
}
