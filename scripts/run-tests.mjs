#!/usr/bin/env node
// Runs the compiled test files with Node's test runner, one `node --test` per file, each under a
// deadline: a file that does not finish (a hang, or a process that cannot exit) is killed with its
// children and counted as failed, naming the file, instead of holding the whole run until CI's
// limit. Node 20's `node --test` does not expand globs, so this lists the files itself.
// Usage: node scripts/run-tests.mjs [tier ...]
// where a tier is unit, conformance or multiprocess (default: all of them, in that order).
// RINGREDUCE_TEST_FILE_TIMEOUT_S sets the deadline per file (default 300 s).
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const tiers = process.argv.slice(2);
const roots = (tiers.length > 0 ? tiers : ['unit', 'conformance', 'multiprocess']).map((t) => join('dist', 'test', t));
const fileTimeoutMs = Number(process.env.RINGREDUCE_TEST_FILE_TIMEOUT_S ?? 300) * 1000;

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

const running = new Set();
// The files run in their own process groups: Ctrl-C stops the ones running, then this.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const child of running) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }
    process.exit(130);
  });
}

/**
 * Runs one file; its output is passed through as it comes, or in one piece at the end when
 * `buffered` (files running side by side). Resolves to its counts, or marks it failed.
 */
function runFile(file, buffered) {
  return new Promise((resolve) => {
    const started = performance.now();
    // Its own process group, so that a kill reaches the ranks and browsers the file started.
    const child = spawn(process.execPath, ['--test', file], {
      stdio: ['ignore', 'pipe', buffered ? 'pipe' : 'inherit'],
      detached: true,
    });
    running.add(child);
    let tail = '';
    const held = [];
    child.stdout.on('data', (chunk) => {
      if (buffered) held.push(chunk);
      else process.stdout.write(chunk);
      tail = (tail + chunk.toString()).slice(-4096);
    });
    child.stderr?.on('data', (chunk) => held.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, fileTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      if (held.length > 0) process.stdout.write(Buffer.concat(held));
      const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(tail)?.[1] ?? 0);
      const seconds = Math.round((performance.now() - started) / 100) / 10;
      let failure = null;
      if (timedOut) failure = `did not finish within ${fileTimeoutMs / 1000} s: killed with its children`;
      else if (code !== 0) failure = `exited with ${signal ?? `code ${code}`}`;
      resolve({
        file,
        seconds,
        failure,
        tests: count('tests'),
        pass: count('pass'),
        fail: count('fail'),
        skipped: count('skipped'),
      });
    });
  });
}

/** Runs `files`, `parallel` at a time, in order of start. */
async function runFiles(files, parallel) {
  const results = [];
  let next = 0;
  const lane = async () => {
    while (next < files.length) {
      const file = files[next++];
      results.push(await runFile(file, parallel > 1));
    }
  };
  await Promise.all(Array.from({ length: parallel }, lane));
  return results;
}

/** Files that run with no other file beside them. */
const kAlone = new Set(['multiprocess/browser_ranks.test.js']);

const results = [];
for (const root of roots) {
  const files = collect(root);
  if (files.length === 0) {
    console.error(`no test files under ${root}: run "npm run build" first`);
    process.exit(1);
  }
  // Every tier runs two files at a time (one process each; a multi-process file's ranks spend
  // much of their time waiting on timers and children). The heaviest file, whose browsers and
  // ranks would take both cores, runs first with nothing beside it, so that its deadlines hold.
  const alone = files.filter((file) => kAlone.has(file.replace(/^dist\/test\//, '')));
  results.push(...(await runFiles(alone, 1)));
  results.push(...(await runFiles(files.filter((file) => !alone.includes(file)), 2)));
}

const sum = (key) => results.reduce((total, r) => total + r[key], 0);
const failed = results.filter((r) => r.failure !== null);
console.log(
  `# files ${results.length}, tests ${sum('tests')}, pass ${sum('pass')}, fail ${sum('fail')}, skipped ${sum('skipped')}`,
);
// The slowest files, for whoever has to keep the whole run within CI's time.
const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
console.log(`# slowest files: ${slowest.map((r) => `${r.file.replace(/^dist\/test\//, '')} ${r.seconds} s`).join(', ')}`);
for (const r of failed) console.log(`# FAILED ${r.file} (${r.seconds} s): ${r.failure}`);
process.exit(failed.length > 0 ? 1 : 0);
