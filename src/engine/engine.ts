/**
 * The engine of one rank, running in its worker thread. It orchestrates the pipeline
 *
 *   enqueue → report to the coordinator → agreed response → execute → settle
 *
 * and owns the stages (TensorQueue, Coordinator on rank 0, Executor) and the transport. It
 * wakes only on events: a request from the caller's thread, a control message from a peer, a
 * finished algorithm or a timer with a deadline; an idle engine uses no CPU.
 *
 * Failure model: a broken link to any peer breaks the job (a collective needs every rank):
 * every pending and future collective rejects with the PeerFailureError naming that peer.
 * Mismatches and stalls fail only the collectives concerned; the job goes on.
 */

import { selectKernel } from '../algorithms/reduce.js';
import { createWasmKernels } from '../algorithms/reduce_wasm.js';
import type { Config } from '../api/config.js';
import { fromErrorRecord, PeerFailureError, type RingReduceError, ShutdownError, toErrorRecord } from '../api/errors.js';
import { SharedMemoryReclaimer } from '../api/shared_memory_reclaimer.js';
import type { Logger } from '../observability/logger.js';
import { Timeline, timelinePathFor } from '../observability/timeline.js';
import type { Transport } from '../transport/transport.js';
import { decodeControl, encodeControl } from './codec.js';
import { Coordinator } from './coordinator.js';
import { Executor } from './executor.js';
import { planFusion } from './fusion.js';
import type { ControlMessage, ExecuteResponse, Request, Response } from './messages.js';
import { ResponseCache } from './response_cache.js';
import { type Entry, TensorQueue } from './tensor_queue.js';
import type { FromEngine } from './worker_protocol.js';

const kCoordinator = 0;

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
  private readonly reclaimer = new SharedMemoryReclaimer();

  constructor(
    private readonly config: Config,
    private readonly transport: Transport,
    private readonly post: (message: FromEngine) => void,
    private readonly logger: Logger,
  ) {
    this.cache = new ResponseCache(config.cacheCapacity);
    if (config.timeline) {
      const path = config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline;
      this.timeline = new Timeline(path, config.rank);
    }
    this.executor = new Executor(transport, {
      kernels: createWasmKernels() ?? selectKernel,
      fusionThresholdBytes: config.fusionThresholdBytes,
      timeline: this.timeline,
    });
    if (config.rank === kCoordinator) {
      this.coordinator = new Coordinator({
        size: config.size,
        stallTimeoutMs: config.stallTimeoutMs,
        stallWarningMs: config.stallWarningMs,
        publish: (responses) => this.publish({ type: 'responses', responses: this.fuse(responses) }),
        publishShutdown: () => this.publish({ type: 'shutdown-ack' }),
        logger,
      });
    }
    transport.onControl((peer, payload) => this.onControl(peer, payload));
    transport.onPeerFailure((peer, error) => this.onPeerFailure(peer, error));
  }

  enqueue(id: number, request: Request, buffer: Entry['buffer']): void {
    if (this.failure || this.closing) {
      this.post({ type: 'failed', id, error: toErrorRecord(this.failure ?? new ShutdownError('ringreduce is shutting down')) });
      return;
    }
    this.queue.add(this.timeline ? { id, request, buffer, queuedUs: this.timeline.now() } : { id, request, buffer });
    this.outbox.push(request);
    // Requests the caller made in one burst reach the coordinator as one report.
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
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
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.failure) return;
    const requests = this.outbox;
    this.outbox = [];
    if (this.timeline) this.markPhase(requests, 'QUEUE', 'queuedUs', 'reportedUs');
    if (this.coordinator) {
      this.coordinator.onRequests(this.config.rank, requests);
      return;
    }
    const wire = requests.map((r) => {
      const id = this.cache.idOf(r);
      return id === undefined ? r : { cached: id };
    });
    this.sendToCoordinator({ type: 'requests', requests: wire });
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

  /** Sends a coordinator message to every rank, this one included; cached responses travel as ids. */
  private publish(message: ControlMessage): void {
    let wire = message;
    if (message.type === 'responses') {
      const responses = message.responses.map((r) => {
        const ids = this.cache.idsFor(r as Response);
        return ids ? { kind: 'cached' as const, ids } : r;
      });
      wire = { type: 'responses', responses };
    }
    const bytes = encodeControl(wire);
    const sends: Promise<void>[] = [];
    for (let peer = 0; peer < this.config.size; peer++) {
      if (peer === this.config.rank || this.failedPeers.has(peer)) continue;
      sends.push(this.transport.sendControl(peer, bytes).catch((error) => this.fail(error)));
    }
    this.lastPublish = Promise.all(sends);
    this.handleAtRank(message);
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
    else if (peer === kCoordinator) this.handleAtRank(message);
  }

  private handleAtCoordinator(rank: number, message: ControlMessage): void {
    if (!this.coordinator) return;
    if (message.type === 'requests') {
      const requests: Request[] = [];
      for (const r of message.requests) {
        const request = 'cached' in r ? this.cache.request(r.cached) : r;
        if (!request) {
          this.badCacheId(rank);
          return;
        }
        requests.push(request);
      }
      this.coordinator.onRequests(rank, requests);
    } else if (message.type === 'shutdown') this.coordinator.onShutdown(rank);
  }

  private handleAtRank(message: ControlMessage): void {
    if (message.type === 'responses') {
      for (const r of message.responses) {
        const response = r.kind === 'cached' ? this.cache.expand(r.ids) : r;
        if (!response) {
          this.badCacheId(kCoordinator);
          return;
        }
        // Learned in response order on every rank, so every rank assigns the same ids.
        if (response.kind === 'execute') this.cache.learn(response.names.map((name) => this.queue.get(name)?.request));
        this.schedule(response);
      }
    } else if (message.type === 'shutdown-ack') {
      this.shutdownAcked?.();
    }
  }

  private schedule(response: Response): void {
    if (response.kind === 'error') {
      const error = fromErrorRecord({ kind: response.errorKind, message: response.message });
      for (const name of response.names) {
        const entry = this.queue.take(name);
        if (entry) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
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
        this.reclaimer.release((entry.buffer?.byteLength ?? 0) + (results[i]?.output?.byteLength ?? 0));
      }
    } catch (error) {
      for (const entry of entries) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(this.failure ?? error) });
      if (!this.failure) this.fail(error);
    }
  }

  private badCacheId(peer: number): void {
    this.fail(new PeerFailureError(`rank ${peer} sent a response cache id this rank never assigned`, peer));
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
    for (const entry of this.queue.drain()) this.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
  }
}
