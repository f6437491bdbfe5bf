#!/usr/bin/env node
// Runs the compiled test files with Node's test runner. Node 20's `node --test` does not expand
// globs, so this lists the files itself. Usage: node scripts/run-tests.mjs [tier ...]
// where a tier is unit, conformance or multiprocess (default: all of them, in that order).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const tiers = process.argv.slice(2);
const roots = (tiers.length > 0 ? tiers : ['unit', 'conformance', 'multiprocess']).map((t) => join('dist', 'test', t));

function collect(dir) {
  let entries;
  try {
    entries = readdirSync(dir).sort();
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return collect(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const files = roots.flatMap(collect);
if (files.length === 0) {
  console.error(`no test files under ${roots.join(', ')}: run "npm run build" first`);
  process.exit(1);
}
// One file at a time: multi-rank tests start several threads or processes each, and the
// machine this runs on in CI has 2 cores.
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], { stdio: 'inherit' });
process.exit(result.status ?? 1);
