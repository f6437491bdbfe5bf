/**
 * This rank as a worker of an elastic job (ringrun --elastic): it takes its rank and size from
 * each generation the launcher publishes in its store (rendezvous/generations.ts). The store
 * connection is the platform's: TCP on Node, the launcher's WebSocket bridge in a browser.
 */
import type { Config } from '../core/config.js';
import { awaitGeneration, generationJobId, latestGeneration, placementOf } from '../rendezvous/generations.js';
import type { Store } from '../rendezvous/store.js';
import type { ElasticMembership } from './platform.js';

export class ElasticWorker implements ElasticMembership {
  private current = 0;
  /** When the latest generation was last asked for, and what it was (commits ask often). */
  private checked = { at: Number.NEGATIVE_INFINITY, latest: 0 };

  /** Worker `id` of the job `base` describes, over `store` (which it closes with itself). */
  constructor(
    private readonly base: Config,
    private readonly id: string,
    private readonly store: Store,
  ) {}

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
