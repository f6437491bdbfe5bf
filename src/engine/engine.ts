/**
 * The engine of one rank, running in its worker thread. It owns the transport and one SetEngine
 * per process set this rank belongs to (the world is set 0; set_engine.ts runs each set's
 * negotiation and execution), plus send and recv (point_to_point.ts), and it routes the control
 * messages between them: a set's messages carry its id and its ranks are numbered inside the set.
 * It wakes only on events: a request from the caller's thread, a control message from a peer, a
 * finished algorithm or a timer with a deadline; an idle engine uses no CPU.
 *
 * Failure model: a broken link to any peer breaks the job (a collective needs every rank of its
 * set, and sets share the links): every pending and future call rejects with the
 * PeerFailureError naming that peer. Mismatches and stalls fail only the collectives concerned;
 * the job goes on.
 */

import type { CostModel } from '../algorithms/cost_model.js';
import { hierarchyOf, uniformHostLayout } from '../algorithms/hierarchy.js';
import { hubsOf } from '../algorithms/hubs.js';
import { type KernelSelector, selectKernel } from '../algorithms/reduce.js';
import { createWasmKernels } from '../algorithms/reduce_wasm.js';
import { CallTable } from '../core/call_table.js';
import type { Config } from '../core/config.js';
import { asDType } from '../core/dtypes.js';
import {
  fromErrorRecord,
  InvalidArgumentError,
  PeerFailureError,
  type RingReduceError,
  ShutdownError,
  toErrorRecord,
} from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { ReusePool } from '../core/reuse_pool.js';
import { type Collect, SharedMemoryReclaimer } from '../core/shared_memory_reclaimer.js';
import type { Timeline } from '../observability/timeline.js';
import { SubgroupTransport } from '../transport/subgroup_transport.js';
import type { Transport } from '../transport/transport.js';
import type { ExecutionResult } from './execution/executor.js';
import { isPeerRequest, PointToPoint } from './execution/point_to_point.js';
import type { Entry } from './negotiation/tensor_queue.js';
import type { Membership } from './ops/op_spec.js';
import type { BurstGate } from './ready/burst_gate.js';
import { StatsWriter } from './reporting/stats.js';
import { SetEngine, type SetMessage } from './set_engine.js';
import type { FromEngine, Submission } from './threads/worker_protocol.js';
import type { AutotuneOptions } from './tuning/autotuner.js';
import { decodeControl, detachControl, encodeControl } from './wire/codec.js';
import { CountingTransport } from './wire/counting_transport.js';
import type { ControlMessage, Request } from './wire/messages.js';
import type { PeerRequest } from './wire/peer_request.js';

const kCoordinator = 0;

/** Whether an execution result hands the caller nothing (no output, shape or counts). */
function isEmpty(result: object | undefined): boolean {
  if (result === undefined) return true;
  for (const _ in result) return false;
  return true;
}

/** A call between submission and settlement (a collective's is its queue entry): what stats and the dashboard read of it. */
export interface Unsettled {
  request: Request | PeerRequest;
  buffer: Entry['buffer'];
  /** performance.now() at submission. */
  submittedMs: number;
}

/** What an engine may be given beyond its configuration, transport, completion sink and logger. */
export interface EngineOptions {
  /** Holds the report while the caller is still submitting (worker only; see burst_gate.ts). */
  burstGate?: BurstGate;
  /**
   * Defers a set's report of newly queued calls so that the rest of a burst joins it. Unset:
   * the next turn of the event loop (runSoon), after the burst's messages have arrived.
   */
  reportSoon?: (task: () => void) => void;
  /** Where the counters go: the caller's shared buffer (worker), or a buffer of its own. */
  stats?: StatsWriter;
  /** The host of every rank (topology.ts: exchanged at start-up); unset: not known, collectives run flat. */
  hosts?: readonly number[];
  /** Which ranks run in a browser (topology.ts); unset: none does. */
  browsers?: readonly boolean[];
  /** The job's α, β and γ for the choices by cost from 8 ranks on (cost_probe.ts); unset: the built-in ones. */
  costModel?: Partial<CostModel>;
  /**
   * The Chrome trace of this rank's phases, opened by the thread's entry (openTimeline: a file,
   * so Node only); the engine closes it at shutdown. Unset: no trace.
   */
  timeline?: Timeline;
  /** This thread's garbage collector, for the reclaimer of fresh shared memory; unset: none is forced. */
  collect?: Collect;
  /** With config.autotune: the log sink and, for tests, the trial sizes and a score (tuning/autotuner.ts). */
  autotune?: AutotuneOptions;
}

/** Messages for a set this rank has not defined yet (a faster member's), held at most: a bound on a broken peer. */
const kMaxEarlyMessages = 100_000;
/** Encoded control messages from this size up reuse arrays (smaller ones cost less than the bookkeeping). */
const kReusedEncodingMinBytes = 4096;
/** Free encoding arrays kept for reuse. */
const kReusedEncodingBytes = 2 * 1024 * 1024;

export class Engine {
  private readonly sets = new Map<number, SetEngine>();
  /** The members of every set defined so far, this rank's or not. */
  private readonly members = new Map<number, readonly number[]>();
  private readonly removed = new Set<number>();
  /** Messages for sets this rank will define soon (a member that defined it first already speaks). */
  private readonly early = new Map<number, [number, SetMessage][]>();
  /** Arrays that large encoded messages reuse (sendEncoded). */
  private readonly encoded = new ReusePool(kReusedEncodingBytes);
  private earlyCount = 0;
  private readonly world: SetEngine;
  /** Sends and recvs: between two ranks, outside negotiation. */
  private readonly p2p: PointToPoint;
  private readonly kernels: KernelSelector;
  private failure: RingReduceError | undefined;
  private closing = false;
  private shutdownAcked: (() => void) | undefined;
  private readonly failedPeers = new Set<number>();
  private readonly timeline: Timeline | undefined;
  /** Collects this thread's handles of fresh memory it is done with (see SharedMemoryReclaimer). */
  private readonly reclaimer: SharedMemoryReclaimer;
  private readonly burstGate: BurstGate | undefined;
  private readonly reportSoon: ((task: () => void) => void) | undefined;
  private readonly autotune: AutotuneOptions | undefined;
  /** The host of every rank (topology.ts: exchanged at start-up); unset: not known, collectives run flat. */
  private readonly hosts: readonly number[] | undefined;
  /** Which ranks run in a browser (topology.ts: exchanged at start-up): the leaves of the hub collectives. */
  private readonly browsers: readonly boolean[] | undefined;
  private readonly costModel: Partial<CostModel> | undefined;
  /** Calls submitted and not yet settled, by id; while any are, the transport watches the peers. */
  private readonly unsettled = new CallTable<Unsettled>();
  /** rr.stats(): the counters this engine writes (stats.ts). */
  readonly stats: StatsWriter;
  private leaving = false;

  constructor(
    private readonly config: Config,
    private readonly transport: Transport,
    private readonly postToCaller: (message: FromEngine) => void,
    private readonly logger: Logger,
    options: EngineOptions = {},
  ) {
    const { burstGate, stats = new StatsWriter(), hosts, browsers, timeline, collect, costModel, autotune, reportSoon } = options;
    this.reportSoon = reportSoon;
    this.costModel = costModel;
    this.autotune = config.autotune ? (autotune ?? {}) : undefined;
    this.burstGate = burstGate;
    this.hosts = hosts;
    this.browsers = browsers;
    this.stats = stats;
    this.timeline = timeline;
    this.reclaimer = new SharedMemoryReclaimer({ adaptive: true, ...(collect && { collect }) });
    // Every message is counted on its way (one add): the engine and its sets see only this view.
    this.transport = new CountingTransport(transport, stats, hosts);
    this.kernels = createWasmKernels() ?? selectKernel;
    this.world = this.defineSet(
      0,
      Array.from({ length: config.size }, (_, r) => r),
    ) as SetEngine;
    for (const [i, ranks] of config.processSets.entries()) this.defineSet(i + 1, ranks);
    this.p2p = new PointToPoint({ rank: config.rank, timeoutMs: config.stallTimeoutMs }, this.transport, {
      sendControl: (peer, message) => {
        this.transport.sendControl(peer, encodeControl(message)).catch((error) => this.fail(error));
      },
      post: (message) => this.post(message),
      fail: (error) => this.fail(error),
      members: (set) => this.members.get(set),
    });
    this.transport.onControl((peer, payload) => this.onControl(peer, payload));
    this.transport.onPeerFailure((peer, error) => this.onPeerFailure(peer, error));
  }

  /**
   * Submits a call: a collective of process set `submission.set` (unset: the world), or a send or
   * recv. The facade has checked that this rank is a member of the set. A collective's submission
   * is its queue entry: the engine stamps it and keeps it until it settles.
   */
  enqueue(submission: Submission): void {
    this.accept(submission, performance.now());
    this.updateActivity();
  }

  /**
   * Submits the members of a grouped call at once (engine_main.ts: a bound group's call), as
   * enqueue() each, with the time of submission taken once and the transport told once.
   */
  enqueueAll(submissions: readonly Submission[]): void {
    const submittedMs = performance.now();
    for (const submission of submissions) this.accept(submission, submittedMs);
    this.updateActivity();
  }

  /** enqueue() without telling the transport of the activity (its callers do, once). */
  private accept(submission: Submission, submittedMs: number): void {
    const { id, request } = submission;
    if (this.failure || this.closing) {
      this.stats.submitted(this.unsettled.size);
      this.post({ type: 'failed', id, error: toErrorRecord(this.failure ?? new ShutdownError('ringreduce is shutting down')) });
      return;
    }
    if (isPeerRequest(request)) {
      this.unsettled.set(id, { request, buffer: submission.buffer, submittedMs });
      this.stats.submitted(this.unsettled.size);
      this.updateActivity();
      this.p2p.submit(id, request, submission.buffer as NonNullable<Entry['buffer']>);
      return;
    }
    const entry = submission as Entry;
    if (request.dtype === 'float16') {
      entry.buffer = asDType(request.dtype, entry.buffer);
      entry.output = asDType(request.dtype, entry.output);
    }
    entry.submittedMs = submittedMs;
    this.unsettled.set(id, entry as Entry & Unsettled);
    this.stats.submitted(this.unsettled.size);
    const set = submission.set ?? 0;
    const engine = this.sets.get(set);
    if (!engine) {
      const why = this.removed.has(set) ? 'was removed' : 'has no such member or does not exist';
      this.post({
        type: 'failed',
        id,
        error: toErrorRecord(new InvalidArgumentError(`process set ${set} ${why} on rank ${this.config.rank}`)),
      });
      return;
    }
    engine.enqueue(entry);
  }

  /** Finishes running collectives, rejects queued ones, and leaves the job with the others. */
  async shutdown(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.failAll(
      new ShutdownError('ringreduce was shut down while this call was pending'),
      (request) => new ShutdownError(`ringreduce was shut down while ${request.op} '${request.name}' was pending`),
    );
    await Promise.all([...this.sets.values()].map((set) => set.settled()));
    if (!this.failure && this.config.size > 1) await this.leaveJob();
    // Closing destroys the sockets: let rank 0's shutdown-ack reach every rank first.
    await this.world.lastPublish;
    for (const set of this.sets.values()) set.close();
    this.timeline?.close();
    await this.transport.close();
  }

  /** The world's executions so far, and how many were fused (for tests and diagnostics). */
  get executionCounts(): Readonly<{ executions: number; fused: number }> {
    return this.world.executionCounts;
  }

  /** The world's ready rounds, collectives agreed in them, and rank 0 decisions run (for tests and diagnostics). */
  get negotiation(): Readonly<{ rounds: number; agreedInRounds: number; decisions: number }> {
    return this.world.negotiation;
  }

  /** The world's requests and responses that travelled as cache ids (for tests and diagnostics). */
  get cacheHits(): Readonly<{ requests: number; responses: number }> {
    return this.world.cacheHits;
  }

  /** The `limit` oldest calls still pending, oldest first, with how long each has waited (the dashboard). */
  pendingCalls(limit: number): { name: string; op: string; waitedMs: number }[] {
    const now = performance.now();
    const out: { name: string; op: string; waitedMs: number }[] = [];
    const oldestFirst = this.unsettled.values().sort((a, b) => a.submittedMs - b.submittedMs);
    for (const { request, submittedMs } of oldestFirst) {
      if (out.length >= limit) break;
      out.push({ name: request.name, op: request.op, waitedMs: now - submittedMs });
    }
    return out;
  }

  /** The error that broke the job on this rank, if it broke; whether shutdown has begun (the dashboard). */
  get condition(): { failure: string | undefined; closing: boolean } {
    return { failure: this.failure?.message, closing: this.closing };
  }

  /** What the world's collectives that change the sets call, at their agreed place (ops/process_set.ts). */
  private readonly membership: Membership = {
    define: (id, ranks) => {
      this.defineSet(id, ranks);
    },
    remove: (id) => this.removeSet(id),
  };

  /** Defines set `id`; this rank runs its negotiation only if it is a member. */
  private defineSet(id: number, ranks: readonly number[]): SetEngine | undefined {
    this.members.set(id, ranks);
    const rank = ranks.indexOf(this.config.rank);
    if (rank < 0) return undefined;
    const view = id === 0 ? this.transport : new SubgroupTransport(this.transport, ranks);
    // The world, or a set whose members sit host by host in equal numbers, may run hierarchically.
    const hosts = this.hosts;
    const layout = hosts && uniformHostLayout(ranks.map((r) => hosts[r] as number));
    // Every member on one host (known only when the placements say which host each rank is on).
    const oneHost = hosts !== undefined && ranks.every((r) => hosts[r] === hosts[ranks[0] as number]);
    // A set that mixes browser ranks with Node ranks runs its large allreduces through the Node ranks.
    const inBrowser = (r: number) => this.browsers?.[r] === true;
    const hubs = this.browsers && hubsOf(view, ranks.map(inBrowser));
    const engine = new SetEngine(
      {
        id,
        rank,
        size: ranks.length,
        members: ranks,
        config: this.config,
        kernels: this.kernels,
        ...(this.costModel && { costModel: this.costModel }),
        timeline: this.timeline,
        stats: this.stats,
        hierarchy: layout && hierarchyOf(view, layout),
        hubs,
        ...(oneHost && { oneHost }),
        ...(this.reportSoon && { reportSoon: this.reportSoon }),
        // Only the world is tuned: its collectives are the job's steps.
        ...(id === 0 && this.autotune && { autotune: this.autotune }),
      },
      view,
      {
        send: (member, message) => this.sendTo(ranks[member] as number, message),
        sendAll: (message) => this.sendToAll(ranks, message),
        post: (message) => this.post(message),
        done: (entries, results, skip) => this.settleRun(entries, results, skip),
        fail: (error) => this.fail(error),
        failure: () => this.failure,
        closing: () => this.closing,
        releasedFresh: (bytes) => this.reclaimer.release(bytes),
        ...(id === 0 ? { allShutDown: () => this.shutdownAcked?.(), membership: this.membership } : {}),
      },
      this.logger,
      this.burstGate,
    );
    this.sets.set(id, engine);
    const early = this.early.get(id) ?? [];
    this.early.delete(id);
    this.earlyCount -= early.length;
    for (const [peer, message] of early) engine.onMessage(ranks.indexOf(peer), message);
    return engine;
  }

  /** Removes set `id`: its queued collectives fail, those running finish first. */
  private async removeSet(id: number): Promise<void> {
    this.removed.add(id);
    this.members.delete(id);
    const engine = this.sets.get(id);
    if (!engine) return;
    this.sets.delete(id);
    engine.failAll(new InvalidArgumentError(`process set ${id} was removed while this collective was pending in it`));
    await engine.settled();
    engine.close();
  }

  private async leaveJob(): Promise<void> {
    const acked = new Promise<void>((resolve) => {
      this.shutdownAcked = resolve;
    });
    this.leaving = true;
    this.updateActivity();
    if (this.config.rank === kCoordinator) this.world.onShutdownReport(kCoordinator);
    else this.sendTo(kCoordinator, { type: 'shutdown' }).catch((error) => this.fail(error));
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

  /** Settles a call on the caller's side. */
  private post(message: FromEngine): void {
    if ('id' in message) {
      const call = this.unsettled.take(message.id);
      // Counted before the caller hears of it: a caller that awaited the call finds it counted.
      const code = call ? StatsWriter.codeOf(call.request.op) : -1;
      this.stats.settled(code, call?.buffer?.byteLength ?? 0, message.type === 'done', this.unsettled.size);
    }
    this.postToCaller(message);
    this.updateActivity();
  }

  /** A run's calls are done: counted once for the run, then settled on the caller's side one by one. */
  private settleRun(entries: readonly Entry[], results: readonly ExecutionResult[], skip: ReadonlySet<Entry>): void {
    let calls = 0;
    let bytes = 0;
    for (const entry of entries) {
      if (skip.has(entry) || this.unsettled.take(entry.id) === undefined) continue;
      calls++;
      bytes += entry.buffer?.byteLength ?? 0;
    }
    const first = entries[0];
    if (calls > 0 && first) this.stats.completed(StatsWriter.codeOf(first.request.op), calls, bytes, this.unsettled.size);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as Entry;
      if (skip.has(entry)) continue;
      const result = results[i];
      // Most results are empty (the output is the caller's memory): no spread then.
      this.postToCaller(isEmpty(result) ? { type: 'done', id: entry.id } : { type: 'done', id: entry.id, ...result });
    }
    this.updateActivity();
  }

  /** Whether the engine's sockets keep the process alive (the engine on the caller's thread: never). */
  holdProcess(hold: boolean): void {
    this.transport.holdProcess?.(hold);
  }

  /** Peers are watched (heartbeats, silence detection) only while something is pending: an idle job sleeps. */
  private updateActivity(): void {
    this.transport.setActive?.(this.unsettled.size > 0 || this.leaving);
  }

  /** Sends a control message to rank `peer` (a job rank); a peer known to have failed gets nothing. */
  private sendTo(peer: number, message: ControlMessage): Promise<unknown> {
    return this.sendEncoded([peer], message);
  }

  /** Sends `message` to every rank of `ranks` but this one, encoded once; settles once the OS has them all. */
  private sendToAll(ranks: readonly number[], message: ControlMessage): Promise<unknown> {
    return this.sendEncoded(
      ranks.filter((peer) => peer !== this.config.rank),
      message,
    );
  }

  /**
   * Encodes `message` once and sends it to every rank of `peers`. A large one (a report with
   * eager data) is encoded into an array of `encoded`, given back once every send of it has
   * resolved (a transport is done with a payload then) and none failed.
   */
  private sendEncoded(peers: readonly number[], message: ControlMessage): Promise<unknown> {
    const bytes = encodeControl(message, this.encoded.take);
    let reusable = bytes.byteLength >= kReusedEncodingMinBytes;
    const failed = () => {
      reusable = false;
    };
    const sends = peers.map((peer) => this.sendBytes(peer, bytes, failed));
    const all = sends.length === 1 ? (sends[0] as Promise<unknown>) : Promise.all(sends);
    if (reusable) void all.then(() => reusable && this.encoded.give(bytes));
    return all;
  }

  /** Sends an encoded control message to rank `peer`; a peer known to have failed gets nothing. */
  private sendBytes(peer: number, bytes: Uint8Array, failed?: () => void): Promise<unknown> {
    if (this.failedPeers.has(peer)) return Promise.resolve();
    return this.transport.sendControl(peer, bytes).catch((error) => {
      failed?.();
      this.fail(error);
    });
  }

  private onControl(peer: number, payload: Uint8Array): void {
    let message: ControlMessage;
    try {
      message = decodeControl(payload);
    } catch (error) {
      this.fail(new PeerFailureError(`rank ${peer} sent a malformed control message: ${(error as Error).message}`, peer));
      return;
    }
    if (this.leaving && (message.type === 'ready' || message.type === 'ready-step' || message.type === 'p2p-offer')) {
      // A peer still runs collectives agreed in ready rounds, or sends to this rank, which has
      // left them: waiting for every rank to shut down would hold that call up to the deadline.
      // Leaving now fails it at once on every rank, naming this rank as shut down (Horovod fails
      // such calls too). Requests still go to rank 0's coordinator, which fails what a rank that
      // has shut down never submits (coordinator.ts).
      this.logger.debug(`shutdown: rank ${peer} still runs collectives; leaving without waiting for every rank`);
      this.shutdownAcked?.();
      return;
    }
    switch (message.type) {
      case 'requests':
      case 'responses':
      case 'ready':
      case 'ready-step':
        this.routeToSet(peer, message);
        return;
      case 'shutdown':
        this.world.onShutdownReport(peer);
        return;
      case 'shutdown-ack':
        if (peer === kCoordinator) this.shutdownAcked?.();
        return;
      case 'p2p-offer':
        this.p2p.onOffer(peer, message);
        return;
      case 'p2p-answer':
        this.p2p.onAnswer(peer, message);
        return;
      case 'p2p-withdraw':
        this.p2p.onWithdraw(peer, message.sequence, message.tag, message.set);
        return;
    }
  }

  private routeToSet(peer: number, message: SetMessage): void {
    const id = message.set ?? 0;
    const engine = this.sets.get(id);
    if (engine) {
      const from = (this.members.get(id) as readonly number[]).indexOf(peer);
      if (from < 0) this.fail(new PeerFailureError(`rank ${peer} sent a message of process set ${id}, which it is not in`, peer));
      else engine.onMessage(from, message);
      return;
    }
    // A removed set's last messages (a round answered after the removal) are moot.
    if (this.removed.has(id)) return;
    if (++this.earlyCount > kMaxEarlyMessages) {
      this.fail(
        new PeerFailureError(`rank ${peer} sent too many messages of process set ${id}, which this rank does not know`, peer),
      );
      return;
    }
    const held = this.early.get(id) ?? [];
    this.early.set(id, held);
    // Held by job rank: its rank in the set is known once the set is defined.
    held.push([peer, detachControl(message)]);
  }

  private onPeerFailure(peer: number, error: PeerFailureError): void {
    this.failedPeers.add(peer);
    if (this.closing) {
      // A rank that leaves during shutdown is done, not failed.
      this.world.onShutdownReport(peer);
      if (peer === kCoordinator) this.shutdownAcked?.();
      return;
    }
    this.fail(error);
  }

  /** Breaks the job: every pending and future call on this rank rejects with `error`. */
  private fail(error: unknown): void {
    // Once shutting down, a peer that leaves first or a send cut short by close is expected.
    if (this.failure || this.closing) return;
    const failure = error instanceof PeerFailureError ? error : fromErrorRecord(toErrorRecord(error));
    this.failure = failure;
    // An elastic job expects to lose ranks: the survivors go on (elastic/run.ts).
    if (this.config.elasticWorker === undefined) this.logger.error(`job broken: ${failure.message}`);
    else this.logger.warn(`job broken, forming the next generation: ${failure.message}`);
    this.failAll(failure);
  }

  /** Fails every pending call with `error`; a collective with `collective`'s error for it, if given. */
  private failAll(error: RingReduceError, collective?: (request: Request) => RingReduceError): void {
    for (const set of this.sets.values()) set.failAll(collective ?? error);
    this.p2p.failAll(error);
  }
}
