#!/usr/bin/env node
// Build step (npm run build, after tsc): the scripts ringrun serves to a browser rank's page, each
// one ES module under dist/browser/: the engine worker (engine/threads/web_worker.ts) and the page's own
// script (launcher/browser/page/boot.ts); and a check that the package's entries, 'ringreduce' and
// 'ringreduce/tfjs', bundle for browsers. All bundle for platform 'browser', so package.json's
// `browser` conditions apply (`#platform` is the browser's), and a static import of one of Node's
// builtins still reached (node:fs, node:net, ...) fails the build, naming the file that imports it;
// a dynamic one (a path only Node takes, behind a check) stays as it is.
import { build } from 'esbuild';
import { nodeBuiltins } from '../dist/src/launcher/browser/bundles.js';

const root = new URL('../', import.meta.url);
const path = (relative) => new URL(relative, root).pathname;

async function bundle(entry, options) {
  const found = [];
  await build({
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    logLevel: 'warning',
    entryPoints: [path(entry)],
    plugins: [nodeBuiltins(found)],
    ...options,
  });
  if (found.length > 0) throw new Error(`${entry} does not bundle for browsers: ${found.join('; ')}`);
}

await Promise.all([
  bundle('dist/src/engine/threads/web_worker.js', { outfile: path('dist/browser/engine_worker.js'), sourcemap: true }),
  bundle('dist/src/launcher/browser/page/boot.js', { outfile: path('dist/browser/boot.js'), sourcemap: true }),
  bundle('dist/src/index.js', { write: false }),
  bundle('dist/src/adapters/tfjs/index.js', { write: false, external: ['@tensorflow/tfjs'] }),
]);
