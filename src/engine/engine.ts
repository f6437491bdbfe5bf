/**
 * The engine of one rank, running in its worker thread. It orchestrates the pipeline
 *
 *   enqueue → report to the coordinator → agreed response → execute → settle
 *
 * where a request the response cache knows skips rank 0: it joins this rank's ready set and
 * is agreed in a ready round among all ranks (ready_rounds.ts). Rank 0's responses carry the
 * number of rounds after which they run, so the two streams interleave identically on every
 * rank and every rank executes one agreed sequence.
 *
 * and owns the stages (TensorQueue, Coordinator on rank 0, Executor) and the transport. It
 * wakes only on events: a request from the caller's thread, a control message from a peer, a
 * finished algorithm or a timer with a deadline; an idle engine uses no CPU.
 *
 * Failure model: a broken link to any peer breaks the job (a collective needs every rank):
 * every pending and future collective rejects with the PeerFailureError naming that peer.
 * Mismatches and stalls fail only the collectives concerned; the job goes on.
 */

import { reduceInRankOrder } from '../algorithms/rank_order_reduce.js';
import { type KernelSelector, selectKernel } from '../algorithms/reduce.js';
import { createWasmKernels } from '../algorithms/reduce_wasm.js';
import type { Config } from '../core/config.js';
import { fromErrorRecord, PeerFailureError, type RingReduceError, ShutdownError, toErrorRecord } from '../core/errors.js';
import { SharedMemoryReclaimer } from '../core/shared_memory_reclaimer.js';
import type { Logger } from '../observability/logger.js';
import { Timeline, timelinePathFor } from '../observability/timeline.js';
import type { Transport } from '../transport/transport.js';
import type { BurstGate } from './burst_gate.js';
import { decodeControl, encodeControl } from './codec.js';
import { Coordinator } from './coordinator.js';
import { EagerExchange } from './eager_exchange.js';
import { Executor } from './executor.js';
import { planFusion } from './fusion.js';
import type { ControlMessage, ExecuteResponse, Request, Response, WireResponse } from './messages.js';
import { type ClosedRound, ReadyRounds } from './ready_rounds.js';
import { ResponseCache } from './response_cache.js';
import { type Entry, TensorQueue } from './tensor_queue.js';
import type { FromEngine } from './worker_protocol.js';

const kCoordinator = 0;
/**
 * How long a rank with nothing pending may hold back its answer to a round a peer opened
 * (ready_rounds.ts): long enough to cover a training step's skew between ranks, short next to
 * stall timeouts (rank 0 learns who waits for whom only from closed rounds).
 */
const kAnswerGraceMs = 100;

/** A batch of rank 0's decisions, as received (cache ids expanded). */
interface Decision {
  afterRounds: number;
  evict: number[];
  responses: Response[];
}

export class Engine {
  private readonly queue = new TensorQueue();
  private readonly executor: Executor;
  private readonly coordinator: Coordinator | undefined;
  private outbox: Request[] = [];
  private flushScheduled = false;
  /** Runs executions one after another, in the agreed order. */
  private chain: Promise<void> = Promise.resolve();
  private failure: RingReduceError | undefined;
  private closing = false;
  private shutdownAcked: (() => void) | undefined;
  private readonly failedPeers = new Set<number>();
  /** Settles when the coordinator's last message has been handed to the OS on every link. */
  private lastPublish: Promise<unknown> = Promise.resolve();
  private readonly timeline: Timeline | undefined;
  private readonly cache: ResponseCache;
  private readonly rounds: ReadyRounds;
  private readonly eager: EagerExchange;
  private readonly kernels: KernelSelector;
  /** Rank 0's decisions received and not yet run: each waits until its round count is reached. */
  private readonly decisions: Decision[] = [];
  private advancing = false;
  private advanceAgain = false;
  /** Bounds how long this rank, with nothing pending, holds back its answer to a peer's round. */
  private answerTimer: NodeJS.Timeout | undefined;
  /** Rank 0: what it will publish next (the coordinator's responses, cache evictions). */
  private readonly undecided: { responses: Response[]; evict: number[] } = { responses: [], evict: [] };
  /** Collects this thread's handles of fresh memory it is done with (see SharedMemoryReclaimer). */
  private readonly reclaimer = new SharedMemoryReclaimer({ adaptive: true });
  /** Collectives submitted and not yet settled; while any are, the transport watches the peers. */
  private readonly unsettled = new Set<number>();
  private leaving = false;
  /** Ready rounds closed and rank 0 decisions run (for tests and diagnostics). */
  readonly negotiation = { rounds: 0, agreedInRounds: 0, decisions: 0 };

  constructor(
    private readonly config: Config,
    private readonly transport: Transport,
    private readonly postToCaller: (message: FromEngine) => void,
    private readonly logger: Logger,
    /** Holds the report while the caller is still submitting (worker only; see burst_gate.ts). */
    private readonly burstGate?: BurstGate,
  ) {
    this.cache = new ResponseCache(config.cacheCapacity);
    this.rounds = new ReadyRounds(
      config.rank,
      config.size,
      (round, ids) => this.report(round, ids),
      // Pending means reported: requests not flushed yet (the burst gate may be holding them)
      // cannot be in an answer, so a rank with only those holds its answer until the flush.
      () => this.queue.size > this.outbox.length || this.closing || this.failure !== undefined,
    );
    this.eager = new EagerExchange(config.rank, config.size);
    this.kernels = createWasmKernels() ?? selectKernel;
    if (config.timeline) {
      const path = config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline;
      this.timeline = new Timeline(path, config.rank);
    }
    this.executor = new Executor(transport, {
      kernels: this.kernels,
      fusionThresholdBytes: config.fusionThresholdBytes,
      segmentBytes: config.segmentBytes,
      timeline: this.timeline,
    });
    if (config.rank === kCoordinator) {
      this.coordinator = new Coordinator({
        size: config.size,
        stallTimeoutMs: config.stallTimeoutMs,
        stallWarningMs: config.stallWarningMs,
        publish: (responses) => this.decide(responses),
        publishShutdown: () => {
          this.lastPublish = this.broadcastControl({ type: 'shutdown-ack' });
          this.shutdownAcked?.();
        },
        logger,
      });
    }
    transport.onControl((peer, payload) => this.onControl(peer, payload));
    transport.onPeerFailure((peer, error) => this.onPeerFailure(peer, error));
  }

  enqueue(id: number, request: Request, buffer: Entry['buffer'], output?: Entry['output'], fresh = false): void {
    if (this.failure || this.closing) {
      this.post({ type: 'failed', id, error: toErrorRecord(this.failure ?? new ShutdownError('ringreduce is shutting down')) });
      return;
    }
    const entry: Entry = output ? { id, request, buffer, output } : { id, request, buffer };
    if (fresh) entry.fresh = true;
    if (this.timeline) entry.queuedUs = this.timeline.now();
    this.queue.add(entry);
    this.unsettled.add(id);
    this.updateActivity();
    this.outbox.push(request);
    // Requests the caller made in one burst reach the coordinator as one report.
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      const gate = this.burstGate;
      setImmediate(() => (gate ? gate.whenIdle(() => this.flush()) : this.flush()));
    }
  }

  /** Finishes running collectives, rejects queued ones, and leaves the job with the others. */
  async shutdown(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.failAll(new ShutdownError('ringreduce was shut down while this collective was pending'));
    await this.chain;
    if (!this.failure && this.config.size > 1) await this.leaveJob();
    // Closing destroys the sockets: let rank 0's shutdown-ack reach every rank first.
    await this.lastPublish;
    clearTimeout(this.answerTimer);
    this.coordinator?.close();
    this.executor.close();
    this.timeline?.close();
    await this.transport.close();
  }

  /** Executions run so far, and how many were fused (for tests and diagnostics). */
  get executionCounts(): Readonly<{ executions: number; fused: number }> {
    return this.executor.counts;
  }

  private async leaveJob(): Promise<void> {
    const acked = new Promise<void>((resolve) => {
      this.shutdownAcked = resolve;
    });
    this.leaving = true;
    this.updateActivity();
    this.sendToCoordinator({ type: 'shutdown' });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.logger.warn(`shutdown: not every rank shut down within ${this.config.ioTimeoutMs} ms; leaving anyway`);
        resolve();
      }, this.config.ioTimeoutMs);
    });
    await Promise.race([acked, deadline]);
    clearTimeout(timer);
    this.leaving = false;
    this.updateActivity();
  }

  /** Settles a collective on the caller's side. */
  private post(message: FromEngine): void {
    if ('id' in message) this.unsettled.delete(message.id);
    this.postToCaller(message);
    this.updateActivity();
  }

  /** Peers are watched (heartbeats, silence detection) only while something is pending: an idle job sleeps. */
  private updateActivity(): void {
    this.transport.setActive?.(this.unsettled.size > 0 || this.leaving);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.failure) return;
    const requests = this.outbox;
    this.outbox = [];
    if (this.timeline) this.markPhase(requests, 'QUEUE', 'queuedUs', 'reportedUs');
    const uncached: Request[] = [];
    for (const request of requests) {
      const id = this.cache.idOf(request);
      if (id === undefined) uncached.push(request);
      else this.rounds.add(id);
    }
    if (uncached.length > 0) this.sendToCoordinator({ type: 'requests', requests: uncached });
    this.advance();
  }

  /**
   * Runs what can run: rank 0's decisions whose round has come, and ready rounds as they close,
   * in that interleaving. Called after anything that may let a round open or close.
   */
  private advance(): void {
    // Re-entered from within (rank 0 deciding while it runs a decision): let the outer loop go on.
    if (this.advancing) {
      this.advanceAgain = true;
      return;
    }
    this.advancing = true;
    try {
      do {
        this.advanceAgain = false;
        for (;;) {
          const next = this.decisions[0];
          if (next !== undefined && next.afterRounds <= this.rounds.closed) {
            this.decisions.shift();
            this.runDecision(next);
            continue;
          }
          if (this.failure) return;
          const closed = this.rounds.advance();
          if (!closed) break;
          this.onRoundClosed(closed);
        }
      } while (this.advanceAgain);
    } finally {
      this.advancing = false;
    }
    this.armAnswerTimer();
  }

  private armAnswerTimer(): void {
    if (!this.rounds.holdingAnswer) {
      clearTimeout(this.answerTimer);
      this.answerTimer = undefined;
    } else if (!this.answerTimer) {
      this.answerTimer = setTimeout(() => {
        this.answerTimer = undefined;
        this.rounds.answerNow();
        this.advance();
      }, kAnswerGraceMs);
    }
  }

  /** This rank's contribution to a ready round, with the buffers of its new eager ids. */
  private report(round: number, ready: readonly number[]): readonly number[] {
    const { ids, eager } = this.eager.outgoing(ready, (id) => {
      const request = this.cache.request(id);
      const entry = request && this.queue.get(request.name);
      return entry?.buffer ? { request: entry.request, buffer: entry.buffer } : undefined;
    });
    this.broadcastControl({ type: 'ready', round, ids, eager });
    return ids;
  }

  private onRoundClosed(round: ClosedRound): void {
    this.negotiation.rounds++;
    const responses: ExecuteResponse[] = [];
    const elements = new Map<string, number>();
    for (const id of round.agreed) {
      // Agreed means this rank reported it too, so it holds it (an evicted id is blocked).
      const request = this.cache.request(id);
      const response = this.cache.expand([id]);
      if (!request || !response) continue;
      this.negotiation.agreedInRounds++;
      if (this.eager.isEager(request)) {
        this.finishEager(id, request, round.round);
        continue;
      }
      responses.push(response);
      elements.set(
        request.name,
        request.shape.reduce((a, b) => a * b, 1),
      );
    }
    if (this.coordinator) {
      const waiting: { request: Request; ranks: readonly number[] }[] = [];
      for (const [id, ranks] of round.partial) {
        const request = this.cache.request(id);
        if (request) waiting.push({ request, ranks });
      }
      this.coordinator.watchCached(waiting);
    }
    for (const response of planFusion(responses, (name) => elements.get(name) ?? 0, this.config.fusionThresholdBytes)) {
      this.schedule(response);
    }
  }

  /** An agreed eager allreduce: every rank's buffer is here; reduce them in rank order, in place. */
  private finishEager(id: number, request: Request, round: number): void {
    if (this.timeline) this.markPhase([request], 'NEGOTIATE', 'reportedUs', 'agreedUs');
    const entry = this.queue.take(request.name);
    if (!entry?.buffer) {
      this.eager.forget(id);
      return;
    }
    const buffers = this.eager.take(id, round, request, entry.buffer);
    if (!buffers) {
      this.post({ type: 'failed', id: entry.id, error: toErrorRecord(new ShutdownError('ringreduce: the job broke')) });
      this.fail(
        new PeerFailureError(`a peer sent no or a wrongly sized eager buffer for tensor '${request.name}'`, kCoordinator),
      );
      return;
    }
    const t = this.timeline?.now() ?? 0;
    reduceInRankOrder(buffers, entry.buffer, request.reduceOp, this.kernels);
    this.timeline?.phase(request.name, 'REDUCE', t, { elements: entry.buffer.length });
    this.post({ type: 'done', id: entry.id });
    if (entry.fresh) this.reclaimer.release(entry.buffer.byteLength);
  }

  /** Rank 0: publishes the coordinator's responses (and any pending evictions) to every rank. */
  private decide(responses: Response[]): void {
    this.undecided.responses.push(...this.fuse(responses));
    this.publishDecisions();
  }

  /** Rank 0: merges responses that can run as one (fusion.ts); the sizes come from its own queue. */
  private fuse(responses: Response[]): Response[] {
    const elementsOf = (name: string) => this.queue.get(name)?.buffer?.length ?? 0;
    return planFusion(responses, elementsOf, this.config.fusionThresholdBytes);
  }

  /** Timeline: ends phase `phase` (begun at `from`) of the named entries and starts the next at `to`. */
  private markPhase(
    named: readonly { name: string }[],
    phase: 'QUEUE' | 'NEGOTIATE',
    from: 'queuedUs' | 'reportedUs',
    to: 'reportedUs' | 'agreedUs',
  ) {
    const timeline = this.timeline as Timeline;
    const now = timeline.now();
    for (const { name } of named) {
      const entry = this.queue.get(name);
      if (!entry || entry[from] === undefined) continue;
      timeline.span(name, phase, entry[from], now - entry[from]);
      entry[to] = now;
    }
  }

  private sendToCoordinator(message: ControlMessage): void {
    if (this.coordinator) {
      this.handleAtCoordinator(this.config.rank, message);
      return;
    }
    this.transport.sendControl(kCoordinator, encodeControl(message)).catch((error) => this.fail(error));
  }

  /**
   * Rank 0: sends what it decided to every rank, this one included. The decisions run once a
   * rank has closed as many ready rounds as rank 0 has reached: if rank 0 has contributed to the
   * open round, a peer may close that round before this message arrives but not the next one
   * (rank 0's contribution to it travels behind this message), so every rank runs the decisions
   * between the same two rounds.
   */
  private publishDecisions(): void {
    const { responses, evict } = this.undecided;
    if (responses.length === 0 && evict.length === 0) return;
    this.undecided.responses = [];
    this.undecided.evict = [];
    const afterRounds = this.rounds.closed + (this.rounds.contributedToOpenRound ? 1 : 0);
    const wire: WireResponse[] = responses.map((r) => {
      const ids = this.cache.idsFor(r);
      return ids ? { kind: 'cached' as const, ids } : r;
    });
    this.lastPublish = this.broadcastControl({ type: 'responses', afterRounds, evict, responses: wire });
    this.decisions.push({ afterRounds, evict, responses });
    this.advance();
  }

  /** Sends `message` to every peer still in the job; settles once the OS has them all. */
  private broadcastControl(message: ControlMessage): Promise<unknown> {
    const bytes = encodeControl(message);
    const sends: Promise<void>[] = [];
    for (let peer = 0; peer < this.config.size; peer++) {
      if (peer === this.config.rank || this.failedPeers.has(peer)) continue;
      sends.push(this.transport.sendControl(peer, bytes).catch((error) => this.fail(error)));
    }
    return Promise.all(sends);
  }

  private onControl(peer: number, payload: Uint8Array): void {
    let message: ControlMessage;
    try {
      message = decodeControl(payload);
    } catch (error) {
      this.fail(new PeerFailureError(`rank ${peer} sent a malformed control message: ${(error as Error).message}`, peer));
      return;
    }
    if (message.type === 'requests' || message.type === 'shutdown') this.handleAtCoordinator(peer, message);
    else if (message.type === 'ready') {
      this.eager.receive(peer, message.round, message.eager);
      this.onReady(peer, message.round, message.ids);
    } else if (peer === kCoordinator) this.handleAtRank(message);
  }

  private onReady(peer: number, round: number, ids: number[]): void {
    try {
      this.rounds.onContribution(peer, round, ids);
    } catch (error) {
      this.fail(new PeerFailureError((error as Error).message, peer));
      return;
    }
    this.advance();
  }

  private handleAtCoordinator(rank: number, message: ControlMessage): void {
    if (!this.coordinator) return;
    if (message.type === 'requests') {
      // A cached name asked for with other parameters: every rank drops it from its cache at
      // one agreed place, and ranks holding it ready send it here in full (runDecision).
      for (const request of message.requests) {
        const id = this.cache.idOfName(request.name);
        if (id !== undefined && !this.undecided.evict.includes(id)) this.undecided.evict.push(id);
      }
      this.coordinator.onRequests(rank, message.requests);
      this.publishDecisions();
    } else if (message.type === 'shutdown') this.coordinator.onShutdown(rank);
  }

  private handleAtRank(message: ControlMessage): void {
    if (message.type === 'responses') {
      const responses: Response[] = [];
      for (const r of message.responses) {
        const response = r.kind === 'cached' ? this.cache.expand(r.ids) : r;
        if (!response) {
          this.badCacheId(kCoordinator);
          return;
        }
        responses.push(response);
      }
      this.decisions.push({ afterRounds: message.afterRounds, evict: message.evict, responses });
      this.advance();
    } else if (message.type === 'shutdown-ack') {
      this.shutdownAcked?.();
    }
  }

  /** Runs one batch of rank 0's decisions, at its agreed place (see publishDecisions). */
  private runDecision(decision: Decision): void {
    this.negotiation.decisions++;
    const resend: Request[] = [];
    for (const id of decision.evict) {
      const request = this.cache.request(id);
      this.cache.evict(id);
      this.eager.forget(id);
      this.rounds.block(id);
      if (request && this.rounds.has(id)) {
        this.rounds.remove(id);
        const entry = this.queue.get(request.name);
        if (entry) resend.push(entry.request);
      }
    }
    for (const r of decision.responses) {
      // Learned in decision order on every rank, so every rank assigns the same ids.
      if (r.kind === 'execute') this.cache.learn(r.names.map((name) => this.queue.get(name)?.request));
      this.schedule(r);
    }
    if (resend.length > 0) this.sendToCoordinator({ type: 'requests', requests: resend });
  }

  private schedule(response: Response): void {
    if (response.kind === 'error') {
      const error = fromErrorRecord({ kind: response.errorKind, message: response.message });
      // A stall fails the submissions that waited; this rank's entry, if it was not one of them,
      // is a newer submission that reached this rank before the error did, and it stays.
      const ours = response.ranks === undefined || response.ranks.includes(this.config.rank);
      for (const name of response.names) {
        const entry = ours ? this.queue.take(name) : undefined;
        if (entry) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
        // A cached tensor that stalled: every rank drops it from the open round at this same
        // place (block), and a newer submission is reported again, with its data.
        const id = this.cache.idOfName(name);
        if (id !== undefined) {
          if (ours) this.rounds.remove(id);
          this.rounds.block(id);
          this.eager.withdraw(id);
        }
      }
      return;
    }
    if (this.timeline)
      this.markPhase(
        response.names.map((name) => ({ name })),
        'NEGOTIATE',
        'reportedUs',
        'agreedUs',
      );
    this.chain = this.chain.then(() => this.run(response));
  }

  private async run(response: ExecuteResponse): Promise<void> {
    const entries: Entry[] = [];
    for (const name of response.names) {
      const entry = this.queue.take(name);
      // Missing only once this rank has failed or begun shutting down; the peers will see it.
      if (entry) entries.push(entry);
    }
    if (entries.length === 0) return;
    if (this.failure || entries.length !== response.names.length) {
      const error = toErrorRecord(
        this.failure ?? new ShutdownError('ringreduce was shut down while this collective was pending'),
      );
      for (const entry of entries) this.post({ type: 'failed', id: entry.id, error });
      return;
    }
    if (this.timeline) {
      const now = this.timeline.now();
      for (const e of entries)
        if (e.agreedUs !== undefined) this.timeline.span(e.request.name, 'WAIT', e.agreedUs, now - e.agreedUs);
    }
    try {
      const results = await this.executor.execute(response, entries);
      for (const [i, entry] of entries.entries()) {
        this.post({ type: 'done', id: entry.id, ...results[i] });
        // Only fresh memory: reused buffers (`out`, pools) need no collection to come back.
        const fresh = (entry.fresh ? (entry.buffer?.byteLength ?? 0) : 0) + (results[i]?.output?.byteLength ?? 0);
        if (fresh > 0) this.reclaimer.release(fresh);
      }
    } catch (error) {
      for (const entry of entries) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(this.failure ?? error) });
      if (!this.failure) this.fail(error);
    }
  }

  private badCacheId(peer: number): void {
    this.fail(new PeerFailureError(`rank ${peer} sent a response cache id this rank does not hold`, peer));
  }

  /** Requests and responses that travelled as cache ids (for tests and diagnostics). */
  get cacheHits(): Readonly<{ requests: number; responses: number }> {
    return this.cache.hits;
  }

  private onPeerFailure(peer: number, error: PeerFailureError): void {
    this.failedPeers.add(peer);
    if (this.closing) {
      // A rank that leaves during shutdown is done, not failed.
      this.coordinator?.onShutdown(peer);
      if (peer === kCoordinator) this.shutdownAcked?.();
      return;
    }
    this.fail(error);
  }

  /** Breaks the job: every pending and future collective on this rank rejects with `error`. */
  private fail(error: unknown): void {
    // Once shutting down, a peer that leaves first or a send cut short by close is expected.
    if (this.failure || this.closing) return;
    const failure = error instanceof PeerFailureError ? error : fromErrorRecord(toErrorRecord(error));
    this.failure = failure;
    this.logger.error(`job broken: ${failure.message}`);
    this.failAll(failure);
  }

  private failAll(error: RingReduceError): void {
    this.outbox = [];
    this.rounds.clear();
    this.eager.clear();
    for (const entry of this.queue.drain()) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
  }
}
