/**
 * Watches a job's rendezvous from the launcher, for the progress line: connects to rank 0's
 * store as one more authenticated client and waits, server-side (no polling), for each rank's
 * address key and for the mesh barrier's completion key (rendezvous/mesh.ts). Best effort: a
 * store the launcher cannot reach (rank 0 on a network the launcher is not on, or a command
 * that never calls init()) only means a progress line without those counts.
 */
import { JobKey } from '../rendezvous/auth.js';
import { meshKeyPrefix } from '../rendezvous/mesh.js';
import { TcpStoreClient } from '../rendezvous/tcp_store.js';

export interface StoreWatchOptions {
  host: string;
  port: number;
  jobId: string;
  secret: string | undefined;
  size: number;
  timeoutMs: number;
  signal: AbortSignal;
  /** Connected to the store. */
  onStore(): void;
  onPublished(count: number): void;
  onConnected(): void;
}

export async function watchStore(options: StoreWatchOptions): Promise<void> {
  let client: TcpStoreClient;
  try {
    client = await TcpStoreClient.connect({
      host: options.host,
      port: options.port,
      connectTimeoutMs: options.timeoutMs,
      key: new JobKey(options.secret),
      signal: options.signal,
    });
  } catch {
    return;
  }
  options.onStore();
  const close = () => void client.close();
  options.signal.addEventListener('abort', close, { once: true });
  try {
    const prefix = meshKeyPrefix(options.jobId);
    let published = 0;
    const addresses = Array.from({ length: options.size }, (_, rank) =>
      client.get(`${prefix}addr/${rank}`, options.timeoutMs).then(() => options.onPublished(++published)),
    );
    await Promise.all([...addresses, client.get(`${prefix}all-ready`, options.timeoutMs).then(() => options.onConnected())]);
  } catch {
    // Timed out, or the store went away: the job itself reports what matters.
  } finally {
    options.signal.removeEventListener('abort', close);
    await client.close();
  }
}
