/**
 * Unix domain sockets between ranks on one host: who counts as "on one host", and where a
 * rank's socket lives.
 *
 * Two ranks may use a Unix socket only if one can reach the other's socket file (same kernel
 * and mount namespace, hence the same /tmp) AND they share a network (same network
 * namespace): ranks in separate network namespaces stand for separate hosts
 * (test/multiprocess/multihost_netns.test.ts cuts their links with `ip link set down`), and a
 * Unix socket would bypass the cut. The identity is a digest of the boot id and both namespace
 * links; where they cannot be read (non-Linux), there is none and ranks keep TCP.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';

/** sun_path holds 108 bytes on Linux (104 on macOS), one of them the terminating NUL. */
const kMaxPathBytes = 103;

/** Equal on two ranks iff each can dial the other's Unix socket and they share a network; null: unknown. */
export function sameHostIdentity(): string | null {
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const net = readlinkSync('/proc/self/ns/net');
    const mnt = readlinkSync('/proc/self/ns/mnt');
    if (boot === '' || net === '' || mnt === '') return null;
    return createHash('sha256').update(`${boot}\n${net}\n${mnt}`).digest('hex').slice(0, 32);
  } catch {
    return null;
  }
}

let sequence = 0;

/**
 * A socket path for `rank` of `jobId` in the temporary directory, or null when it would not fit
 * in sun_path. The job id and rank name it for a human; the process, thread and a counter keep
 * two live listeners apart even when jobs share an id (the default "ringreduce", test suites).
 */
export function localSocketPath(jobId: string, rank: number): string | null {
  const job = createHash('sha256').update(jobId).digest('hex').slice(0, 8);
  const path = join(tmpdir(), `rr-${job}-${rank}-${process.pid}-${threadId}-${sequence++}.sock`);
  return Buffer.byteLength(path) <= kMaxPathBytes ? path : null;
}

/** Removes a socket file; a missing one is fine. Left by a crashed process whose pid was reused. */
export function removeSocketFile(path: string): void {
  try {
    rmSync(path, { force: true });
  } catch {}
}
