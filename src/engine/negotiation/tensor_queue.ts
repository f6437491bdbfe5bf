/**
 * The requests this rank has submitted and not yet finished, by name. The engine takes an
 * entry out when the coordinator's response for its name arrives.
 *
 * A name taken out keeps its key, marked empty, until empty keys outnumber the rest: a training
 * loop queues the same names every step, and a Map emptied and filled again by each step
 * allocates a new table at every growth and shrink (a grouped step of 100 tensors on one rank
 * took a quarter longer: docs/performance.md, "Queues that keep their names").
 */

import type { OpEntry } from '../ops/op_spec.js';
import type { Submission } from '../threads/worker_protocol.js';
import type { Request } from '../wire/messages.js';

/** Empty keys kept at most beyond the number of queued entries (names used once: unnamed calls). */
const kEmptyKeysSlack = 1024;

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
  /** Queued entries by name; undefined: a name taken out, its key kept for its next call. */
  private readonly entries = new Map<string, Entry | undefined>();
  private count = 0;

  add(entry: Entry): void {
    const { name } = entry.request;
    if (this.entries.get(name) === undefined) this.count++;
    this.entries.set(name, entry);
  }

  has(name: string): boolean {
    return this.entries.get(name) !== undefined;
  }

  get(name: string): Entry | undefined {
    return this.entries.get(name);
  }

  take(name: string): Entry | undefined {
    const entry = this.entries.get(name);
    if (entry === undefined) return undefined;
    this.entries.set(name, undefined);
    this.count--;
    if (this.entries.size > 2 * this.count + kEmptyKeysSlack) this.dropEmptyKeys();
    return entry;
  }

  /** Removes and returns every entry (for failing them all at once). */
  drain(): Entry[] {
    const all: Entry[] = [];
    for (const entry of this.entries.values()) if (entry !== undefined) all.push(entry);
    this.entries.clear();
    this.count = 0;
    return all;
  }

  get size(): number {
    return this.count;
  }

  private dropEmptyKeys(): void {
    for (const [name, entry] of this.entries) if (entry === undefined) this.entries.delete(name);
  }
}
