#!/usr/bin/env node
// Builds the optional MPI addon (native/) when MPI is installed; otherwise says so in one line
// and succeeds. Run by `npm install` (the "install" script); never fails the install. Without
// the addon the MPI backend explains what to install when asked for (src/transport/mpi/loader.ts).
//   node scripts/build-native.mjs [--verbose] [--dry-run]
// --dry-run prints the node-gyp command it would run, and runs nothing.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = join(root, 'native');
const verbose = process.argv.includes('--verbose');
const dryRun = process.argv.includes('--dry-run');

function mpiPresent() {
  const probe = spawnSync(process.env.MPICC ?? 'mpicc', ['--version'], { stdio: 'ignore' });
  return probe.status === 0 || process.env.MPI_CFLAGS !== undefined;
}

// npm passes the node-gyp it bundles; in a checkout without npm's environment, find it.
function nodeGyp() {
  if (process.env.npm_config_node_gyp) return process.env.npm_config_node_gyp;
  const require = createRequire(import.meta.url);
  for (const candidate of ['node-gyp/bin/node-gyp.js', 'npm/node_modules/node-gyp/bin/node-gyp.js']) {
    try {
      return require.resolve(candidate);
    } catch {}
  }
  const npmGyp = join(dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js');
  return existsSync(npmGyp) ? npmGyp : undefined;
}

// Node's headers, found here rather than by a committed `nodedir` (which breaks every machine
// whose headers are elsewhere): a distribution's node (/usr/bin/node: Debian, Ubuntu) has them
// in /usr/include/node, where node-gyp would not look, and node-gyp cannot download headers
// for a distribution's build anyway; any other node (nvm, official tarballs, Homebrew) is left
// to node-gyp's default (its cache, or a download matching process.version). An explicit
// `npm_config_nodedir` (npm --nodedir, or the user's own .npmrc) still wins.
function nodeDir() {
  if (process.env.npm_config_nodedir) return process.env.npm_config_nodedir;
  if (process.execPath === '/usr/bin/node' && existsSync('/usr/include/node/node_api.h')) return '/usr';
  return undefined;
}

function main() {
  if (!existsSync(join(nativeDir, 'binding.gyp'))) return;
  if (!mpiPresent()) {
    console.log('ringreduce: MPI not found (no mpicc): skipping the optional MPI addon; the TCP backend works without it');
    return;
  }
  const gyp = nodeGyp();
  if (!gyp) {
    console.log('ringreduce: node-gyp not found: skipping the optional MPI addon');
    return;
  }
  const dir = nodeDir();
  if (verbose) console.log(`ringreduce: node-gyp ${gyp}, Node headers from ${dir ?? "node-gyp's default"}`);
  const args = [gyp, 'rebuild', '--directory', nativeDir, '-j', '2', ...(dir ? [`--nodedir=${dir}`] : [])];
  if (dryRun) {
    console.log([process.execPath, ...args].join(' '));
    return;
  }
  const build = spawnSync(process.execPath, args, { cwd: nativeDir, stdio: verbose ? 'inherit' : 'pipe', encoding: 'utf8' });
  if (build.status === 0) {
    console.log('ringreduce: built the MPI addon (native/build/Release/ringreduce_mpi.node)');
    return;
  }
  const tail = `${build.stdout ?? ''}${build.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n');
  console.log(`ringreduce: building the optional MPI addon failed; the TCP backend still works.\n${tail}`);
}

try {
  main();
} catch (error) {
  console.log(`ringreduce: skipping the optional MPI addon: ${error.message}`);
}
