/** Runs conformance cases: on every rank of an in-process world at once, or on this process's rank of a job. */
import type { RingReduce } from '../../../src/api/runtime.js';
import { type ConformanceCase, failureOf } from './case.js';

/** Why `c` does not apply to a job of `size` ranks (on any backend), or undefined. */
export function sizeSkipReason(c: ConformanceCase, size: number): string | undefined {
  const min = c.minRanks ?? 1;
  return size < min ? `needs at least ${min} ranks` : undefined;
}

/**
 * Why the MPI conformance job (multiprocess/fixtures/mpi_conformance_job.ts) leaves `c` out: the
 * 2^20 + 3 element cases, which mpi_native_collectives.test.ts runs through the addon over every
 * dtype and op, and the in-process backends through the API.
 */
export function mpiCaseSkipReason(c: ConformanceCase, size: number): string | undefined {
  return sizeSkipReason(c, size) ?? (c.name.includes('2^20 + 3') ? 'run natively by mpi_native_collectives' : undefined);
}

/**
 * Runs `c` on every rank of `world` (rank r = world[r]) at once and waits for all of them;
 * throws one error with every rank's failure.
 */
export async function runOnWorld(c: ConformanceCase, world: readonly RingReduce[]): Promise<void> {
  const size = world.length;
  const settled = await Promise.allSettled(world.map((rr, rank) => c.run(rr, rank, size)));
  const failures = settled.flatMap((s, rank) => (s.status === 'rejected' ? [failureOf(c, rank, size, s.reason)] : []));
  if (failures.length > 0) throw new Error(failures.join('\n'));
}

/** Runs `c` on `rr`, this process's rank of a job whose other ranks run it too; its failure, or undefined. */
export async function runOnRank(c: ConformanceCase, rr: RingReduce): Promise<string | undefined> {
  try {
    await c.run(rr, rr.rank(), rr.size());
    return undefined;
  } catch (error) {
    return failureOf(c, rr.rank(), rr.size(), error);
  }
}

/**
 * A short digest of a list of case names: a process reports it to show which cases it ran. Two
 * 32-bit FNV-1a hashes of the names' UTF-8 bytes (synchronous, and the same in a browser rank).
 */
export function casesDigest(names: readonly string[]): string {
  const bytes = new TextEncoder().encode(names.join('\n'));
  const fnv = (seed: number) => {
    let hash = seed;
    for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
    return hash.toString(16).padStart(8, '0');
  };
  return fnv(0x811c9dc5) + fnv(0x050c5d1f);
}
