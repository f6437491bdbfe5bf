/**
 * The requests this rank has submitted and not yet finished, by name. The engine takes an
 * entry out when the coordinator's response for its name arrives.
 */

import type { OpEntry } from '../ops/op_spec.js';
import type { Submission } from '../threads/worker_protocol.js';
import type { Request } from '../wire/messages.js';

/** A collective's submission as the engine queues it (the submission object itself, stamped). */
export interface Entry extends OpEntry<Request>, Omit<Submission<Request>, 'buffer' | 'output'> {
  /** performance.now() at submission (stats, the dashboard). */
  submittedMs?: number;
  /** Timeline only: when the entry was queued, reported to rank 0, and agreed (µs). */
  queuedUs?: number;
  reportedUs?: number;
  agreedUs?: number;
}

export class TensorQueue {
  private readonly entries = new Map<string, Entry>();

  add(entry: Entry): void {
    this.entries.set(entry.request.name, entry);
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  get(name: string): Entry | undefined {
    return this.entries.get(name);
  }

  take(name: string): Entry | undefined {
    const entry = this.entries.get(name);
    this.entries.delete(name);
    return entry;
  }

  /** Removes and returns every entry (for failing them all at once). */
  drain(): Entry[] {
    const all = [...this.entries.values()];
    this.entries.clear();
    return all;
  }

  get size(): number {
    return this.entries.size;
  }
}
