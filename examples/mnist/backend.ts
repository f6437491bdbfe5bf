/**
 * Selecting the tfjs backend. The WebAssembly backend is the fast one on Node without
 * tfjs-node; in Node it must be told where its .wasm files are, as a directory path (it reads
 * them from disk), so we resolve the package's dist/ folder. In a browser rank it fetches them
 * from its script's folder, where ringrun serves them, and runs on one thread, as on Node: every
 * rank then computes the same way, and the ranks' weights stay identical bit for bit. A browser
 * rank may use WebGL instead (--browser-backend webgl): other kernels and precision, so its
 * weights drift from the others' (resync.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';

export type BackendName = 'wasm' | 'cpu' | 'webgl';

export async function useBackend(name: BackendName): Promise<void> {
  if (name === 'webgl' && typeof process !== 'undefined') {
    throw new Error('webgl is a browser backend: use it with --browser-backend');
  }
  if (name === 'wasm' && typeof process !== 'undefined') {
    const [{ createRequire }, { dirname, join }] = await Promise.all([import('node:module'), import('node:path')]);
    const require = createRequire(import.meta.url);
    const packageDir = dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json'));
    setWasmPaths(`${join(packageDir, 'dist')}/`);
  } else if (name === 'wasm') {
    tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
  }
  if (!(await tf.setBackend(name))) throw new Error(`tfjs backend '${name}' failed to initialise`);
  await tf.ready();
}
