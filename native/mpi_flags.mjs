#!/usr/bin/env node
// Prints the compiler or linker flags of the MPI installation for binding.gyp:
//   node mpi_flags.mjs cflags|libs
// MPI_CFLAGS / MPI_LIBS override the detection (for an MPI whose wrapper is not on PATH).
// Open MPI's wrapper answers --showme:compile/--showme:link, MPICH's -compile_info/-link_info.
import { execFileSync } from 'node:child_process';

const what = process.argv[2];
const override = what === 'cflags' ? process.env.MPI_CFLAGS : process.env.MPI_LIBS;
if (override !== undefined) {
  process.stdout.write(override);
  process.exit(0);
}

function run(args) {
  try {
    return execFileSync(process.env.MPICC ?? 'mpicc', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

function tokens(line, keep) {
  return line
    .split(/\s+/)
    .filter((t) => keep.some((prefix) => t.startsWith(prefix)))
    .join(' ');
}

let out = run([what === 'cflags' ? '--showme:compile' : '--showme:link']);
if (out === undefined) {
  // MPICH: the whole command line; keep only the flags that matter.
  const line = run([what === 'cflags' ? '-compile_info' : '-link_info']) ?? '';
  out = what === 'cflags' ? tokens(line, ['-I', '-D']) : tokens(line, ['-L', '-l', '-Wl,']);
}
process.stdout.write(out);
