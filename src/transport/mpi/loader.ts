/**
 * Loads the MPI addon. The only place that knows where the binary lives: native/build/Release/
 * of the package, built at install time by scripts/build-native.mjs when MPI is present.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../../core/errors.js';
import { kDTypeCodes, kReduceOpCodes, type MpiBinding } from './native_binding.js';

// From dist/src/transport/mpi/ (where this file runs from) up to the package root.
const kAddonPath = fileURLToPath(new URL('../../../../native/build/Release/ringreduce_mpi.node', import.meta.url));

const kHowToInstall =
  'install MPI with its development files (Debian/Ubuntu: `apt-get install openmpi-bin libopenmpi-dev`, ' +
  'or `apt-get install mpich libmpich-dev` for MPICH), then build the addon: `npm rebuild ringreduce` ' +
  '(npm 11 and later run it once allowed: `npm install-scripts approve ringreduce` first) ' +
  '(in a checkout of ringreduce: `node scripts/build-native.mjs`). Or use the TCP backend: RINGREDUCE_BACKEND=tcp';

/** Where the addon is expected; for messages and tests. */
export function mpiAddonPath(): string {
  return kAddonPath;
}

/** The addon, or an InvalidArgumentError saying what to install. */
export function loadMpiBinding(path: string = kAddonPath): MpiBinding {
  if (!existsSync(path)) {
    throw new InvalidArgumentError(
      `the MPI backend needs ringreduce's MPI addon, which is not built (${path} is missing): ${kHowToInstall}`,
    );
  }
  let binding: MpiBinding;
  try {
    binding = createRequire(import.meta.url)(path) as MpiBinding;
  } catch (error) {
    throw new InvalidArgumentError(
      `the MPI addon ${path} failed to load (${(error as Error).message}); is the MPI library it was built against still installed? To fix it, ${kHowToInstall}`,
    );
  }
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  // The codes travel as plain numbers: an addon that numbers dtypes or reduce ops otherwise
  // (another version) would reduce with the wrong op.
  if (!same(binding.dtypes, kDTypeCodes) || !same(binding.reduceOps, kReduceOpCodes)) {
    throw new InvalidArgumentError(
      `the MPI addon ${path} is from another version of ringreduce (its reduce ops: ${String(binding.reduceOps)}; ` +
        `expected: ${kReduceOpCodes.join(',')}): rebuild it (node scripts/build-native.mjs)`,
    );
  }
  return binding;
}

/** The addon if it loads, else undefined (for the 'auto' backend choice). */
export function tryLoadMpiBinding(path: string = kAddonPath): MpiBinding | undefined {
  try {
    return loadMpiBinding(path);
  } catch {
    return undefined;
  }
}
