/**
 * Selecting the tfjs backend. The WebAssembly backend is the fast one on Node without
 * tfjs-node; in Node it must be told where its .wasm files are, as a directory path (it reads
 * them from disk), so we resolve the package's dist/ folder.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';

export type BackendName = 'wasm' | 'cpu';

export async function useBackend(name: BackendName): Promise<void> {
  if (name === 'wasm') {
    const require = createRequire(import.meta.url);
    const packageDir = dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json'));
    setWasmPaths(`${join(packageDir, 'dist')}/`);
  }
  if (!(await tf.setBackend(name))) throw new Error(`tfjs backend '${name}' failed to initialise`);
  await tf.ready();
}
