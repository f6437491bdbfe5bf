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
 * and owns the stages (TensorQueue, rank 0's decisions, the ready path, Executor) and the transport. It
 * wakes only on events: a request from the caller's thread, a control message from a peer, a
 * finished algorithm or a timer with a deadline; an idle engine uses no CPU.
 *
 * Failure model: a broken link to any peer breaks the job (a collective needs every rank):
 * every pending and future collective rejects with the PeerFailureError naming that peer.
 * Mismatches and stalls fail only the collectives concerned; the job goes on.
 */

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
import { Executor } from './executor.js';
import type { ControlMessage, ExecuteResponse, Request, Response } from './messages.js';
import { isPeerRequest, type PeerRequest, PointToPoint } from './point_to_point.js';
import { type Decision, Rank0Decisions } from './rank0_decisions.js';
import { ReadyPath } from './ready_path.js';
import { ResponseCache } from './response_cache.js';
import { type Entry, TensorQueue } from './tensor_queue.js';
import type { FromEngine } from './worker_protocol.js';

const kCoordinator = 0;

export class Engine {
  private readonly queue = new TensorQueue();
  private readonly executor: Executor;
  private readonly cache: ResponseCache;
  private readonly ready: ReadyPath;
  /** Sends and recvs: between two ranks, outside negotiation. */
  private readonly p2p: PointToPoint;
  /** Rank 0 only. */
  private readonly rank0: Rank0Decisions | undefined;
  private outbox: Request[] = [];
  private flushScheduled = false;
  /** Runs executions one after another, in the agreed order. */
  private chain: Promise<void> = Promise.resolve();
  private failure: RingReduceError | undefined;
  private closing = false;
  private shutdownAcked: (() => void) | undefined;
  private readonly failedPeers = new Set<number>();
  private readonly timeline: Timeline | undefined;
  /** Rank 0's decisions received and not yet run: each waits until its round count is reached. */
  private readonly decisions: Decision[] = [];
  private advancing = false;
  private advanceAgain = false;
  /** Collects this thread's handles of fresh memory it is done with (see SharedMemoryReclaimer). */
  private readonly reclaimer = new SharedMemoryReclaimer({ adaptive: true });
  /** Collectives submitted and not yet settled; while any are, the transport watches the peers. */
  private readonly unsettled = new Set<number>();
  private leaving = false;
  private decisionsRun = 0;

  constructor(
    private readonly config: Config,
    private readonly transport: Transport,
    private readonly postToCaller: (message: FromEngine) => void,
    private readonly logger: Logger,
    /** Holds the report while the caller is still submitting (worker only; see burst_gate.ts). */
    private readonly burstGate?: BurstGate,
  ) {
    this.cache = new ResponseCache(config.cacheCapacity);
    const kernels: KernelSelector = createWasmKernels() ?? selectKernel;
    if (config.timeline) {
      const path = config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline;
      this.timeline = new Timeline(path, config.rank);
    }
    this.executor = new Executor(transport, {
      kernels,
      fusionThresholdBytes: config.fusionThresholdBytes,
      segmentBytes: config.segmentBytes,
      timeline: this.timeline,
    });
    if (config.rank === kCoordinator) {
      this.rank0 = new Rank0Decisions(
        config,
        this.cache,
        this.queue,
        {
          rounds: () => this.ready,
          broadcast: (message) => this.broadcastControl(message),
          decided: (decision) => {
            this.decisions.push(decision);
            this.advance();
          },
          allShutDown: () => this.shutdownAcked?.(),
        },
        logger,
      );
    }
    this.ready = new ReadyPath(config, this.cache, this.queue, this.executor, this.rank0?.stalls, {
      broadcast: (message) => void this.broadcastControl(message),
      // Pending means reported: requests not flushed yet (the burst gate may be holding them)
      // cannot be in an answer, so a rank with only those holds its answer until the flush.
      busy: () => this.queue.size > this.outbox.length || this.closing || this.failure !== undefined,
      schedule: (response) => this.schedule(response),
      post: (message) => this.post(message),
      releasedFresh: (bytes) => this.reclaimer.release(bytes),
      agreed: (requests) => this.timeline && this.markPhase(requests, 'NEGOTIATE', 'reportedUs', 'agreedUs'),
      fail: (error) => this.fail(error),
      advance: () => this.advance(),
    });
    this.p2p = new PointToPoint({ rank: config.rank, timeoutMs: config.stallTimeoutMs }, transport, {
      sendControl: (peer, message) => {
        this.transport.sendControl(peer, encodeControl(message)).catch((error) => this.fail(error));
      },
      post: (message) => this.post(message),
      fail: (error) => this.fail(error),
    });
    transport.onControl((peer, payload) => this.onControl(peer, payload));
    transport.onPeerFailure((peer, error) => this.onPeerFailure(peer, error));
  }

  enqueue(id: number, request: Request | PeerRequest, buffer: Entry['buffer'], output?: Entry['output'], fresh = false): void {
    if (this.failure || this.closing) {
      this.post({ type: 'failed', id, error: toErrorRecord(this.failure ?? new ShutdownError('ringreduce is shutting down')) });
      return;
    }
    if (isPeerRequest(request)) {
      this.unsettled.add(id);
      this.updateActivity();
      this.p2p.submit(id, request, buffer as NonNullable<Entry['buffer']>);
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
    await this.rank0?.lastPublish;
    this.ready.close();
    this.rank0?.close();
    this.executor.close();
    this.timeline?.close();
    await this.transport.close();
  }

  /** Executions run so far, and how many were fused (for tests and diagnostics). */
  get executionCounts(): Readonly<{ executions: number; fused: number }> {
    return this.executor.counts;
  }

  /** Ready rounds closed, collectives agreed in them, and rank 0 decisions run (for tests and diagnostics). */
  get negotiation(): Readonly<{ rounds: number; agreedInRounds: number; decisions: number }> {
    return { rounds: this.ready.counts.rounds, agreedInRounds: this.ready.counts.agreed, decisions: this.decisionsRun };
  }

  /** Requests and responses that travelled as cache ids (for tests and diagnostics). */
  get cacheHits(): Readonly<{ requests: number; responses: number }> {
    return this.cache.hits;
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
      else this.ready.add(id);
    }
    if (uncached.length > 0) this.sendToCoordinator({ type: 'requests', requests: uncached });
    this.advance();
  }

  /**
   * Runs what can run: rank 0's decisions whose round has come, and ready rounds as they close,
   * in that interleaving (rank0_decisions.ts says why it is the same on every rank). Called
   * after anything that may let a round open or close.
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
          if (next !== undefined && next.afterRounds <= this.ready.closed) {
            this.decisions.shift();
            this.runDecision(next);
            continue;
          }
          if (this.failure || !this.ready.closeNext()) break;
        }
      } while (this.advanceAgain);
    } finally {
      this.advancing = false;
    }
    this.ready.armAnswerTimer();
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
    if (this.rank0) {
      this.handleAtCoordinator(this.config.rank, message);
      return;
    }
    this.transport.sendControl(kCoordinator, encodeControl(message)).catch((error) => this.fail(error));
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
      this.ready.onReport(peer, message);
      this.advance();
    } else if (message.type === 'p2p-offer') this.p2p.onOffer(peer, message);
    else if (message.type === 'p2p-answer') this.p2p.onAnswer(peer, message);
    else if (message.type === 'p2p-withdraw') this.p2p.onWithdraw(peer, message.sequence, message.tag);
    else if (peer === kCoordinator) this.handleAtRank(message);
  }

  private handleAtCoordinator(rank: number, message: ControlMessage): void {
    if (!this.rank0) return;
    if (message.type === 'requests') this.rank0.onRequests(rank, message.requests);
    else if (message.type === 'shutdown') this.rank0.onShutdown(rank);
  }

  private handleAtRank(message: ControlMessage): void {
    if (message.type === 'responses') {
      const responses: Response[] = [];
      for (const r of message.responses) {
        const response = r.kind === 'cached' ? this.cache.expand(r.ids) : r;
        if (!response) {
          this.fail(new PeerFailureError(`rank ${kCoordinator} sent a response cache id this rank does not hold`, kCoordinator));
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

  /** Runs one batch of rank 0's decisions, at its agreed place (see rank0_decisions.ts). */
  private runDecision(decision: Decision): void {
    this.decisionsRun++;
    const resend: Request[] = [];
    for (const id of decision.evict) {
      const request = this.cache.request(id);
      this.cache.evict(id);
      if (this.ready.evict(id) && request) {
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
        // place, and a newer submission is reported again, with its data.
        const id = this.cache.idOfName(name);
        if (id !== undefined) this.ready.failed(id, ours);
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

  private onPeerFailure(peer: number, error: PeerFailureError): void {
    this.failedPeers.add(peer);
    if (this.closing) {
      // A rank that leaves during shutdown is done, not failed.
      this.rank0?.onShutdown(peer);
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
    this.ready.clear();
    this.p2p.failAll(error);
    for (const entry of this.queue.drain()) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
  }
}
