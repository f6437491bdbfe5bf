/**
 * Eager exchange of small cached allreduces: the data rides with the ready round.
 *
 * A small allreduce is all latency: with ready rounds (ready_rounds.ts) it would cost one
 * one-way message to agree and at least one more to exchange the data. Here a rank that reports
 * a small cached allreduce ready sends its buffer in the same message, to every peer. When the
 * round that agrees on it closes, every rank already holds every rank's buffer (each peer's
 * report containing the id travels with or after its data, on the same ordered link; with the
 * recursive-doubling exchange the buffers are forwarded, with their rank, within the round that
 * reports them: ready_doubling.ts) and
 * reduces them locally in rank order (algorithms/rank_order_reduce.ts): the collective costs one
 * one-way message and no run of an algorithm.
 *
 * Which tensors: those whose operation's spec says they fit (ops/allreduce.ts: allreduces of at
 * most 1 KiB, a loss, metrics, a small layer's gradient, in jobs of at most 8 ranks); the rule depends only on
 * the cached request, so every rank makes the same choice.
 *
 * Data is sent once per submission: when the id is first reported after it became ready.
 * Receivers keep each buffer with the round of the report that carried it. With 3 or more ranks
 * a peer can be a round ahead: it closed round r (it had every report) and reported its next
 * submission of the same id for round r + 1, while this rank still waits for a third rank's
 * report for r. Closing round r therefore takes, per peer, the latest buffer reported for round
 * r or earlier (a resubmission after a failure replaces a stale one) and keeps later ones.
 */
import type { ForcedAlgorithms } from '../../core/algorithm_names.js';
import { constructorOf } from '../../core/dtypes.js';
import type { TypedArray } from '../../core/types.js';
import { specOf } from '../ops/registry.js';
import type { Request } from '../wire/messages.js';

/** Eager bytes in one report, far below the transports' control message limit (16 MiB over TCP). */
export const kEagerMaxReportBytes = 1024 * 1024;

export interface EagerData {
  id: number;
  data: Uint8Array;
}

export class EagerExchange {
  /** Ids whose buffer this rank has sent for the current submission. */
  private readonly sent = new Set<number>();
  /** Peers' buffers by id, indexed by rank, oldest first, each with the round it was reported for. */
  private readonly received = new Map<number, { round: number; data: Uint8Array }[][]>();

  constructor(
    private readonly rank: number,
    private readonly size: number,
    /** The algorithms forced for the job (RINGREDUCE_ALGORITHMS): a forced collective does not go eagerly. */
    private readonly forced?: ForcedAlgorithms,
  ) {}

  /** Whether `request` travels eagerly (its spec decides, the same way on every rank). */
  isEager(request: Request): boolean {
    return specOf(request).eager?.fits(request, this.size, this.forced) ?? false;
  }

  /**
   * What to report of `ready` (ascending) and the buffers to send with it: those of eager ids
   * not sent yet. The buffers of one report stay within `kEagerMaxReportBytes` (control messages
   * are bounded); ids whose buffer does not fit are left for the next round, with everything
   * after them, so that an id is never reported before its buffer has gone out.
   */
  outgoing(
    ready: readonly number[],
    lookup: (id: number) => { request: Request; buffer: TypedArray } | undefined,
  ): { ids: readonly number[]; eager: EagerData[] } {
    const eager: EagerData[] = [];
    let bytes = 0;
    for (const [i, id] of ready.entries()) {
      if (this.sent.has(id)) continue;
      const entry = lookup(id);
      if (!entry || !this.isEager(entry.request)) continue;
      const { buffer } = entry;
      if (bytes + buffer.byteLength > kEagerMaxReportBytes && eager.length > 0) return { ids: ready.slice(0, i), eager };
      bytes += buffer.byteLength;
      eager.push({ id, data: new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength) });
      this.sent.add(id);
    }
    return { ids: ready, eager };
  }

  /** A peer's buffers from its report for `round`, copied out of the message (the transport may reuse its bytes). */
  receive(peer: number, round: number, data: readonly EagerData[]): void {
    for (const { id, data: bytes } of data) {
      let byRank = this.received.get(id);
      if (!byRank) {
        byRank = Array.from({ length: this.size }, () => []);
        this.received.set(id, byRank);
      }
      byRank[peer]?.push({ round, data: bytes.slice() });
    }
  }

  /**
   * Every rank's buffer of eager id `id`, agreed in round `round`, in rank order, with `own` at
   * this rank's place; undefined if a peer's is missing or has the wrong size (a protocol error).
   */
  take(id: number, round: number, request: Request, own: TypedArray): TypedArray[] | undefined {
    this.sent.delete(id);
    const byRank = this.received.get(id);
    const ctor = constructorOf(request.dtype);
    const buffers: TypedArray[] = [];
    let later = false;
    for (let rank = 0; rank < this.size; rank++) {
      if (rank === this.rank) {
        buffers.push(own);
        continue;
      }
      const queue = byRank?.[rank] ?? [];
      let taken = 0;
      while (taken < queue.length && (queue[taken] as { round: number }).round <= round) taken++;
      const bytes = taken > 0 ? queue[taken - 1]?.data : undefined;
      queue.splice(0, taken);
      later ||= queue.length > 0;
      if (!bytes || bytes.byteLength !== own.byteLength) return undefined;
      buffers.push(new ctor(bytes.buffer, bytes.byteOffset, own.length));
    }
    if (!later) this.received.delete(id);
    return buffers;
  }

  /** The submission of `id` on this rank is over without running (failed, evicted): send again next time. */
  withdraw(id: number): void {
    this.sent.delete(id);
  }

  /** `id` left the cache: peers' buffers for it will never be used. */
  forget(id: number): void {
    this.sent.delete(id);
    this.received.delete(id);
  }

  clear(): void {
    this.sent.clear();
    this.received.clear();
  }
}
