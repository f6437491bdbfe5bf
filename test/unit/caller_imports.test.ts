/**
 * What the caller's thread loads: the package's entry reaches the facade, the platform and the
 * protocol it shares with the engine (worker_protocol.ts, peer_request.ts, the hand-off rings, the stats layout), but none of the
 * engine's own code (negotiation, ready rounds, the op specs) and none of the algorithms but the
 * fp16 conversions the caller runs itself. The engine's thread loads those from its own entry,
 * and so does the caller's thread, with import(), when the engine runs on it
 * (RINGREDUCE_ENGINE_THREAD=0): what only a dynamic import reaches is not counted.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** Engine modules the caller's thread shares with the engine: protocols and shared-memory layouts, no engine logic. */
const kSharedWithEngine = [
  'src/engine/threads/worker_protocol.ts',
  'src/engine/threads/hand_off.ts',
  'src/engine/reporting/stats.ts',
  // What a send or recv submits (its kAnyPeer).
  'src/engine/wire/peer_request.ts',
];
/** Algorithms the caller runs: fp16 compression's conversions (one WebAssembly module with the kernels). */
const kCallerAlgorithms = /^src\/algorithms\/(half_convert|reduce_wasm|reduce|reduce_half|wasm\/.*)\.ts$/;

it("the caller's thread loads no engine code and no algorithm it does not run", async () => {
  const result = await build({
    entryPoints: ['src/index.ts'],
    absWorkingDir: kRoot,
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    splitting: true,
    write: false,
    outdir: 'out',
    metafile: true,
    logLevel: 'silent',
  });
  // The entry's chunk and the chunks it imports statically: what loads with the package.
  const { outputs } = result.metafile;
  const entry = Object.keys(outputs).find((path) => outputs[path]?.entryPoint === 'src/index.ts');
  assert.ok(entry, Object.keys(outputs).join(', '));
  const loaded = new Set<string>();
  for (const queue = [entry]; queue.length > 0; ) {
    const chunk = queue.pop() as string;
    if (loaded.has(chunk)) continue;
    loaded.add(chunk);
    for (const { path, kind } of outputs[chunk]?.imports ?? [])
      if (kind === 'import-statement' && path in outputs) queue.push(path);
  }
  // `#platform` resolves to the compiled platform (package.json's imports): counted as its source.
  const inputs = [...loaded]
    .flatMap((chunk) => Object.keys(outputs[chunk]?.inputs ?? {}))
    .map((path) => path.replace(/^dist\/(src\/.*)\.js$/, '$1.ts'));
  assert.ok(inputs.includes('src/api/runtime.ts'), inputs.join(', '));
  assert.deepEqual(
    inputs.filter((path) => path.startsWith('src/engine/') && !kSharedWithEngine.includes(path)),
    [],
  );
  assert.deepEqual(
    inputs.filter((path) => path.startsWith('src/algorithms/') && !kCallerAlgorithms.test(path)),
    [],
  );
  assert.deepEqual(
    inputs.filter((path) => path.startsWith('src/transport/') && path !== 'src/transport/transport.ts'),
    [],
  );
});
