/**
 * The cached path: how ranks agree on collectives the response cache knows without rank 0, in
 * ready rounds (ready_rounds.ts), and finish the tiny ones whose data rode with the round
 * (eager_exchange.ts). The engine feeds it this rank's ready ids and peers' reports, and calls
 * `closeNext` in its advance loop; each closed round yields the agreed collectives, planned for
 * fusion, in the order every rank runs them.
 *
 * Holding an answer: a rank with nothing pending does not answer a round a peer opened (the
 * round could only close empty) for at most `kAnswerGraceMs`: long enough to cover a training
 * step's skew between ranks, short next to stall timeouts (rank 0 learns who waits for whom only
 * from closed rounds).
 */
import type { ForcedAlgorithms } from '../../core/algorithm_names.js';
import { bytesPerElement } from '../../core/dtypes.js';
import { PeerFailureError, ShutdownError, toErrorRecord } from '../../core/errors.js';
import { elementCount } from '../../core/shapes.js';
import type { TypedArray } from '../../core/types.js';
import type { Executor } from '../execution/executor.js';
import { FusionPlan } from '../execution/fusion.js';
import type { Coordinator } from '../negotiation/coordinator.js';
import type { ResponseCache } from '../negotiation/response_cache.js';
import type { Entry, TensorQueue } from '../negotiation/tensor_queue.js';
import type { FromEngine } from '../threads/worker_protocol.js';
import type { ControlMessage, Request, Response } from '../wire/messages.js';
import { EagerExchange } from './eager_exchange.js';
import { AllToAllExchange } from './ready_all_to_all.js';
import { DoublingExchange } from './ready_doubling.js';
import type { ExchangeMode } from './ready_exchange_mode.js';
import { type ClosedRound, ReadyRounds } from './ready_rounds.js';

const kAnswerGraceMs = 100;

export interface ReadyPathHooks {
  /** Sends a control message to every peer. */
  broadcast(message: ControlMessage): void;
  /** Sends a control message to one peer. */
  send(peer: number, message: ControlMessage): void;
  /** Whether this rank has reported requests pending, so that it answers a peer's round at once. */
  busy(): boolean;
  /** Runs an agreed collective after everything scheduled before it. */
  schedule(response: Response): void;
  /** Settles a call on the caller's side. */
  post(message: FromEngine): void;
  /** An eager collective finished with fresh memory that can be collected. */
  releasedFresh(bytes: number): void;
  /** Timeline: the named entries finished negotiating. */
  agreed(requests: readonly Request[]): void;
  /** Rank 0's decision messages: published (on rank 0) or received so far. */
  decisions(): number;
  /** Breaks the job. */
  fail(error: unknown): void;
  /** Something may advance: a timer fired. */
  advance(): void;
}

export interface ReadyPathSettings {
  rank: number;
  size: number;
  fusionThresholdBytes: number;
  /** How rounds exchange contributions (ready_exchange_mode.ts), the same on every member. */
  exchange: ExchangeMode;
  /** The job's forced algorithms, which keep their collectives off the eager path. */
  forced?: ForcedAlgorithms | undefined;
}

type ReportMessage = ControlMessage & { type: 'ready' | 'ready-step' };

export class ReadyPath {
  private readonly rounds: ReadyRounds;
  private readonly exchange: AllToAllExchange | DoublingExchange;
  private readonly eager: EagerExchange;
  /** Bounds how long this rank, with nothing pending, holds back its answer to a peer's round. */
  private answerTimer: NodeJS.Timeout | undefined;
  /** When this rank began to hold back its answer to the open round (performance.now()); unset: it does not. */
  private holdingSince: number | undefined;
  /** Ready rounds closed, and collectives agreed in them (for tests and diagnostics). */
  readonly counts = { rounds: 0, agreed: 0 };

  constructor(
    private readonly settings: ReadyPathSettings,
    private readonly cache: ResponseCache,
    private readonly queue: TensorQueue,
    private readonly executor: Executor,
    private readonly coordinator: Coordinator | undefined,
    private readonly hooks: ReadyPathHooks,
  ) {
    const { rank, size } = settings;
    this.eager = new EagerExchange(rank, size, settings.forced);
    this.exchange =
      settings.exchange === 'all-to-all'
        ? new AllToAllExchange(rank, size, (round, ids) => this.report(round, ids))
        : new DoublingExchange(
            rank,
            size,
            (ready) => ({ ids: ready, eager: this.eager.outgoing(ready, (id) => this.eagerEntry(id)) }),
            (peer, step) => hooks.send(peer, { type: 'ready-step', ...step }),
            hooks.decisions,
          );
    this.rounds = new ReadyRounds(size, this.exchange, hooks.busy, hooks.decisions);
  }

  /** Rounds closed so far: rank 0's decisions name the count after which they run. */
  get closed(): number {
    return this.rounds.closed;
  }

  get contributedToOpenRound(): boolean {
    return this.rounds.contributedToOpenRound;
  }

  /**
   * The threshold that plans the fusion of the rounds closed from now on. Autotune changes it
   * at one place of the agreed order, the same on every member, so all plan alike.
   */
  set fusionThresholdBytes(bytes: number) {
    this.settings.fusionThresholdBytes = bytes;
  }

  /** A submission the cache knows under `id` is ready on this rank. */
  add(id: number): void {
    this.rounds.add(id);
  }

  /** A peer's message of a round. */
  onReport(peer: number, message: ReportMessage): void {
    try {
      const open = this.rounds.closed;
      if (message.type === 'ready' && this.exchange instanceof AllToAllExchange) {
        this.eager.receive(peer, message.round, message.eager);
        this.exchange.receive(peer, message.round, message.ids, open);
      } else if (message.type === 'ready-step' && this.exchange instanceof DoublingExchange) {
        for (const e of message.eager) this.eager.receive(e.rank, message.round, [e]);
        this.exchange.receive(peer, message, open);
      } else {
        const theirs = message.type === 'ready' ? 'all-to-all' : 'recursive-doubling';
        throw new Error(
          `rank ${peer} exchanges ready rounds ${theirs}, this rank ${this.settings.exchange}: set RINGREDUCE_READY_EXCHANGE (readyExchange) alike on every rank`,
        );
      }
    } catch (error) {
      this.hooks.fail(new PeerFailureError((error as Error).message, peer));
    }
  }

  /** Closes the open round if it can, and runs what it agreed; false when nothing more can close now. */
  closeNext(): boolean {
    const closed = this.rounds.advance();
    if (!closed) return false;
    this.onRoundClosed(closed);
    return true;
  }

  /**
   * `id` left the cache at rank 0's agreed place: it stops counting in rounds, and whether it was
   * ready here (its submission must then go to rank 0 in full) is returned.
   */
  evict(id: number): boolean {
    this.eager.forget(id);
    this.rounds.block(id);
    if (!this.rounds.has(id)) return false;
    this.rounds.remove(id);
    return true;
  }

  /**
   * Takes every ready id out of the rounds (a rank of the set joined: from this agreed place on,
   * everything goes to rank 0 in full) and returns them; they stay in the cache. Every id the
   * cache has handed out (`idCount`) is blocked, not only this rank's ready ones: the open round
   * may close only after the join, when other ranks hold new submissions of these ids, and every
   * rank must then ignore the same ones.
   */
  withdrawAll(idCount: number): number[] {
    const ready = this.rounds.readyIds();
    for (const id of ready) this.rounds.remove(id);
    for (let id = 0; id < idCount; id++) {
      this.eager.withdraw(id);
      this.rounds.block(id);
    }
    return ready;
  }

  /** The cached collective `id` failed: this rank's submission of it (`ours`) is over; a newer one reports again. */
  failed(id: number, ours: boolean): void {
    if (ours) this.rounds.remove(id);
    this.rounds.block(id);
    this.eager.withdraw(id);
  }

  /**
   * Notes whether this rank holds its answer back; call after every advance. A latency loop
   * holds one back on almost every call, for microseconds: the timer is not re-armed per call,
   * it is left to run out and then looks at how long the answer held now has been held.
   */
  armAnswerTimer(): void {
    if (!this.rounds.holdingAnswer) {
      this.holdingSince = undefined;
      return;
    }
    this.holdingSince ??= performance.now();
    if (!this.answerTimer) this.answerTimer = setTimeout(() => this.onAnswerTimer(), kAnswerGraceMs);
  }

  private onAnswerTimer(): void {
    this.answerTimer = undefined;
    if (this.holdingSince === undefined) return;
    const left = this.holdingSince + kAnswerGraceMs - performance.now();
    if (left > 0) {
      this.answerTimer = setTimeout(() => this.onAnswerTimer(), left);
      return;
    }
    this.holdingSince = undefined;
    this.rounds.answerNow();
    this.hooks.advance();
  }

  /** Forgets everything ready (the rank failed or is shutting down); it still answers rounds. */
  clear(): void {
    this.rounds.clear();
    this.eager.clear();
  }

  close(): void {
    clearTimeout(this.answerTimer);
    this.answerTimer = undefined;
    this.holdingSince = undefined;
  }

  /** All-to-all: this rank's contribution to a ready round, with the buffers of its new eager ids. */
  private report(round: number, ready: readonly number[]): readonly number[] {
    const eager = this.eager.outgoing(ready, (id) => this.eagerEntry(id));
    this.hooks.broadcast({ type: 'ready', round, ids: ready, eager });
    return ready;
  }

  /** The queued entry of cached id `id` when it holds a buffer (the entry itself: nothing allocated per call). */
  private eagerEntry(id: number): (Entry & { buffer: TypedArray }) | undefined {
    const request = this.cache.request(id);
    const entry = request && this.queue.get(request.name);
    return entry?.buffer ? (entry as Entry & { buffer: TypedArray }) : undefined;
  }

  private onRoundClosed(round: ClosedRound): void {
    this.counts.rounds++;
    // Every rank plans the same agreed ids alike; a tensor that fuses costs its name, not a response.
    const plan = new FusionPlan(this.settings.fusionThresholdBytes);
    for (const id of round.agreed) {
      // Agreed means this rank reported it too, so it holds it (an evicted id is blocked).
      const request = this.cache.request(id);
      if (!request) {
        // A cached group: its members, in the order they ran when it was learned (never eagerly).
        const group = this.cache.group(id);
        if (!group) continue;
        this.counts.agreed++;
        for (const member of group.members) plan.add(member, member.name, bytesOf(member));
        continue;
      }
      this.counts.agreed++;
      if (this.eager.isEager(request) && this.finishEager(id, request, round.round)) continue;
      // The cached request has this rank's queued shape (a cache hit matches every field but the name).
      plan.add(request, request.name, bytesOf(request));
    }
    if (this.coordinator) {
      const waiting: { request: Request; ranks: readonly number[] }[] = [];
      for (const [id, ranks] of round.partial) {
        const request = this.cache.request(id);
        if (request) waiting.push({ request, ranks });
        else for (const member of this.cache.group(id)?.members ?? []) waiting.push({ request: member, ranks });
      }
      this.coordinator.watchCached(waiting);
    }
    for (const response of plan.responses) this.hooks.schedule(response);
  }

  /**
   * An agreed eager collective: every rank's buffer is here, and the executor finishes it in
   * place. False when some rank withheld its buffer: it takes the algorithms.
   */
  private finishEager(id: number, request: Request, round: number): boolean {
    const own = this.queue.get(request.name)?.buffer;
    const outcome = own
      ? this.eager.take(id, round, request, own, (buffers) =>
          this.executor.finishEager(request, buffers, own, buffers[0] !== own),
        )
      : 'missing';
    if (outcome === 'withheld') return false;
    this.hooks.agreed([request]);
    const entry: Entry | undefined = this.queue.take(request.name);
    if (!entry?.buffer) {
      this.eager.forget(id);
      return true;
    }
    if (outcome === 'missing') {
      this.hooks.post({ type: 'failed', id: entry.id, error: toErrorRecord(new ShutdownError('ringreduce: the job broke')) });
      this.hooks.fail(new PeerFailureError(`a peer sent no or a wrongly sized eager buffer for tensor '${request.name}'`, 0));
      return true;
    }
    this.hooks.post({ type: 'done', id: entry.id });
    if (entry.fresh) this.hooks.releasedFresh(entry.buffer.byteLength);
    return true;
  }
}

/** A tensor's bytes as its request says (the cached request has this rank's queued shape). */
function bytesOf(request: Request): number {
  return elementCount(request.shape) * bytesPerElement(request.dtype);
}
