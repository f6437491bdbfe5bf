#!/usr/bin/env node
// Build step (npm run build, after tsc): the engine worker of a browser rank as one ES module,
// dist/browser/engine_worker.js, which ringrun serves to its pages (engine/web_worker.ts); and a
// check that the package's entry bundles for browsers. Both bundle for platform 'browser', so
// package.json's `browser` conditions apply (`#platform` is the browser's) and any of Node's
// builtins still reached (node:fs, node:net, ...) fails the build, naming the file that imports it.
import { build } from 'esbuild';

const root = new URL('../', import.meta.url);
const path = (relative) => new URL(relative, root).pathname;
const common = { bundle: true, platform: 'browser', format: 'esm', target: 'es2022', logLevel: 'warning' };

await build({
  ...common,
  entryPoints: [path('dist/src/engine/web_worker.js')],
  outfile: path('dist/browser/engine_worker.js'),
  sourcemap: true,
});
await build({ ...common, entryPoints: [path('dist/src/index.js')], write: false });
