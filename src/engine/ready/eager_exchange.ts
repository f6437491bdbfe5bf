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
 * most eagerMaxBytes(N) = 64 KiB / (N-1), a loss, metrics, a small layer's gradient, in jobs of
 * at most 8 ranks); the rule depends only on the cached request, so every rank makes the same choice.
 *
 * A burst goes fused instead: when the new eager buffers of one report would add up to more than
 * that limit (a training step's many small gradients), the report withholds all of them, each
 * with an empty buffer in its place, and they take the algorithms, fused, like larger tensors
 * (one collective over a fusion buffer beats many local reductions of copies that crossed the
 * socket). Whether a collective goes eagerly is decided when its round closes, the same way on
 * every rank: eagerly only if no rank withheld its buffer (every rank sees every rank's choice).
 *
 * Data is sent once per submission: when the id is first reported after it became ready.
 * Receivers keep each buffer with the round of the report that carried it. With 3 or more ranks
 * a peer can be a round ahead: it closed round r (it had every report) and reported its next
 * submission of the same id for round r + 1, while this rank still waits for a third rank's
 * report for r. Closing round r therefore takes, per peer, the latest buffer reported for round
 * r or earlier (a resubmission after a failure replaces a stale one) and keeps later ones.
 *
 * Memory: a peer's buffer is copied out of its message into a buffer of this exchange's pool,
 * which gets it back once the collective is reduced; a training loop's eager tensors reuse the
 * same few buffers instead of touching fresh memory every step.
 */
import type { ForcedAlgorithms } from '../../core/algorithm_names.js';
import { constructorOf } from '../../core/dtypes.js';
import { ReusePool } from '../../core/reuse_pool.js';
import type { TypedArray } from '../../core/types.js';
import { eagerMaxBytes } from '../ops/op_spec.js';
import { specOf } from '../ops/registry.js';
import type { Request } from '../wire/messages.js';

/** Free receive buffers kept for reuse, in bytes. */
const kReuseBytes = 2 * 1024 * 1024;
/** EagerExchange's state of an id for its current submission. */
const kNothing = 0;
const kSentState = 1;
const kWithheldState = 2;
/** The buffer of a withheld eager id (no eager tensor is empty). */
const kWithheld = new Uint8Array(0);

export interface EagerData {
  id: number;
  /** Empty: withheld, the collective takes the algorithms. */
  data: Uint8Array;
}

/** Byte views of the tensors sent eagerly, by tensor: a training loop sends the same arrays every step. */
const kByteViews = new WeakMap<TypedArray, Uint8Array>();

function bytesOf(buffer: TypedArray): Uint8Array {
  let view = kByteViews.get(buffer);
  // A view of a growable buffer may track its length: then the cached bytes are stale.
  if (view === undefined || view.byteLength !== buffer.byteLength) {
    view = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    kByteViews.set(buffer, view);
  }
  return view;
}

/** A peer's buffer as received, with the round it was reported for (data null: withheld). */
interface QueuedBuffer {
  round: number;
  data: Uint8Array | null;
}

/** How closing a round finished an agreed eager id (take). */
export type EagerOutcome = 'reduced' | 'withheld' | 'missing';

export class EagerExchange {
  /**
   * Per id (the cache's ids are small integers), what this rank did with its buffer for the
   * current submission: kSentState, kWithheldState or kNothing. An array, not sets: a training loop
   * marks and clears the same ids every step.
   */
  private state = new Uint8Array(64);
  /**
   * Peers' buffers by id, indexed by rank, oldest first. An id keeps its queues from one
   * submission to the next (a training loop reports the same ids every step); forget drops them.
   */
  private readonly received = new Map<number, QueuedBuffer[][]>();
  /** take's scratch: each rank's buffer for the round being closed. */
  private readonly latest: (Uint8Array | null)[];
  /** Receive buffers the reductions are done with. */
  private readonly pool = new ReusePool(kReuseBytes);
  /** The most eager bytes one report carries. */
  private readonly maxReportBytes: number;

  constructor(
    private readonly rank: number,
    private readonly size: number,
    /** The algorithms forced for the job (RINGREDUCE_ALGORITHMS): a forced collective does not go eagerly. */
    private readonly forced?: ForcedAlgorithms,
  ) {
    this.maxReportBytes = eagerMaxBytes(size);
    this.latest = new Array<Uint8Array | null>(size).fill(null);
  }

  /** Whether `request` may travel eagerly (its spec decides, the same way on every rank). */
  isEager(request: Request): boolean {
    return specOf(request).eager?.fits(request, this.size, this.forced) ?? false;
  }

  /**
   * The buffers to send with a report of `ready`: those of eager ids not sent yet, or, when
   * they add up to more than one report carries, an empty one for each (withheld).
   */
  outgoing(ready: readonly number[], lookup: (id: number) => { request: Request; buffer: TypedArray } | undefined): EagerData[] {
    const eager: EagerData[] = [];
    let bytes = 0;
    for (const id of ready) {
      if (this.stateOf(id) !== kNothing) continue;
      const entry = lookup(id);
      if (!entry || !this.isEager(entry.request)) continue;
      bytes += entry.buffer.byteLength;
      eager.push({ id, data: bytesOf(entry.buffer) });
    }
    const withhold = bytes > this.maxReportBytes;
    for (const e of eager) {
      if (withhold) e.data = kWithheld;
      this.setState(e.id, withhold ? kWithheldState : kSentState);
    }
    return eager;
  }

  /** A peer's buffers from its report for `round`, copied out of the message (the transport may reuse its bytes). */
  receive(peer: number, round: number, data: readonly EagerData[]): void {
    for (const { id, data: bytes } of data) {
      let copy: Uint8Array | null = null;
      if (bytes.byteLength > 0) {
        copy = this.pool.take(bytes.byteLength);
        copy.set(bytes);
      }
      this.queuesOf(id)[peer]?.push({ round, data: copy });
    }
  }

  /**
   * Closes eager id `id`, agreed in round `round`: hands `reduce` every rank's buffer in rank
   * order, with `own` at this rank's place, and takes the peers' back into the pool when it
   * returns ('reduced'); or, if some rank withheld its buffer, leaves it to the algorithms
   * ('withheld'); 'missing' (and no call) if a peer's buffer is missing or has the wrong size
   * (a protocol error).
   */
  take(
    id: number,
    round: number,
    request: Request,
    own: TypedArray,
    reduce: (buffers: readonly TypedArray[]) => void,
  ): EagerOutcome {
    let withheld = this.stateOf(id) === kWithheldState;
    this.setState(id, kNothing);
    const queues = this.received.get(id);
    // Each peer's latest buffer for this round or an earlier one; later rounds' stay queued.
    const latest = this.latest;
    let missing = false;
    for (let rank = 0; rank < this.size; rank++) {
      latest[rank] = null;
      if (rank === this.rank) continue;
      const queue = queues?.[rank];
      let taken = 0;
      while (queue && taken < queue.length && (queue[taken] as QueuedBuffer).round <= round) taken++;
      if (taken === 0) {
        missing = true;
        continue;
      }
      const queued = queue as QueuedBuffer[];
      const { data } = queued[taken - 1] as QueuedBuffer;
      for (let i = 0; i < taken - 1; i++) this.giveBack(queued[i] as QueuedBuffer);
      // The usual case, one buffer: shift allocates nothing (splice returns a new array).
      if (taken === 1) queued.shift();
      else queued.splice(0, taken);
      if (data === null) withheld = true;
      else if (data.byteLength !== own.byteLength) missing = true;
      latest[rank] = data;
    }
    try {
      if (missing) return 'missing';
      if (withheld) return 'withheld';
      const ctor = constructorOf(request.dtype);
      const buffers: TypedArray[] = [];
      for (let rank = 0; rank < this.size; rank++) {
        const data = latest[rank];
        buffers.push(rank === this.rank || !data ? own : new ctor(data.buffer, data.byteOffset, own.length));
      }
      reduce(buffers);
      return 'reduced';
    } finally {
      for (let rank = 0; rank < this.size; rank++) {
        const data = latest[rank];
        if (data) this.pool.give(data);
        latest[rank] = null;
      }
    }
  }

  private stateOf(id: number): number {
    return this.state[id] ?? kNothing;
  }

  private setState(id: number, value: number): void {
    if (id >= this.state.length) {
      if (value === kNothing) return;
      const grown = new Uint8Array(Math.max(id + 1, 2 * this.state.length));
      grown.set(this.state);
      this.state = grown;
    }
    this.state[id] = value;
  }

  private queuesOf(id: number): QueuedBuffer[][] {
    let queues = this.received.get(id);
    if (!queues) {
      queues = Array.from({ length: this.size }, () => []);
      this.received.set(id, queues);
    }
    return queues;
  }

  /** A superseded buffer (a resubmission's newer one replaced it) goes back to the pool. */
  private giveBack(queued: QueuedBuffer): void {
    if (queued.data) this.pool.give(queued.data);
  }

  /** The submission of `id` on this rank is over without running (failed, evicted): send again next time. */
  withdraw(id: number): void {
    this.setState(id, kNothing);
  }

  /** `id` left the cache: peers' buffers for it will never be used. */
  forget(id: number): void {
    this.setState(id, kNothing);
    this.received.delete(id);
  }

  clear(): void {
    this.state.fill(kNothing);
    this.received.clear();
  }
}
