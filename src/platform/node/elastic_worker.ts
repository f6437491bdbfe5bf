/**
 * This process as a worker of an elastic job (ringrun --elastic): it meets the launcher's store
 * (over TCP: Node only) and takes its rank and size from each generation the launcher publishes
 * (rendezvous/generations.ts).
 */
import type { Config } from '../../core/config.js';
import { JobKey } from '../../rendezvous/auth.js';
import { awaitGeneration, generationJobId, latestGeneration, placementOf } from '../../rendezvous/generations.js';
import { TcpStoreClient } from '../../rendezvous/tcp_store.js';
import type { ElasticMembership } from '../platform.js';

export class ElasticWorker implements ElasticMembership {
  private current = 0;
  /** When the latest generation was last asked for, and what it was (commits ask often). */
  private checked = { at: Number.NEGATIVE_INFINITY, latest: 0 };

  private constructor(
    private readonly base: Config,
    private readonly id: string,
    private readonly store: TcpStoreClient,
  ) {}

  static async connect(base: Config, id: string): Promise<ElasticWorker> {
    const store = await TcpStoreClient.connect({
      host: base.storeHost,
      port: base.storePort,
      connectTimeoutMs: base.startTimeoutMs,
      key: new JobKey(base.secret),
    });
    return new ElasticWorker(base, id, store);
  }

  /** The generation this worker runs in (1, 2, ...; 0 before the first). */
  get generation(): number {
    return this.current;
  }

  /** Waits for the next generation that lists this worker; its configuration (rank, size, job id). */
  async next(): Promise<Config> {
    const generation = await awaitGeneration(
      this.store,
      this.base.jobId,
      this.id,
      this.current,
      performance.now() + this.base.startTimeoutMs,
    );
    this.current = generation.number;
    this.checked = { at: performance.now(), latest: generation.number };
    return Object.freeze({
      ...this.base,
      ...placementOf(generation, this.id),
      jobId: generationJobId(this.base.jobId, generation.number),
    });
  }

  /** The newest generation the launcher has published, asked of the store at most every `maxAgeMs`. */
  async latest(maxAgeMs: number): Promise<number> {
    const now = performance.now();
    if (now - this.checked.at >= maxAgeMs)
      this.checked = { at: now, latest: await latestGeneration(this.store, this.base.jobId) };
    return this.checked.latest;
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
