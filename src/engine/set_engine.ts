/**
 * The negotiation and execution of one process set (the world is set 0): the pipeline
 *
 *   enqueue → report to the set's rank 0 → agreed response → execute → settle
 *
 * where a request the response cache knows skips rank 0: it joins this rank's ready set and is
 * agreed in a ready round among the set's members (ready_path.ts). Rank 0's decisions carry the
 * number of rounds after which they run (rank0_decisions.ts), so the two streams interleave
 * identically on every member and every member executes one agreed sequence.
 *
 * Every set has its own queue, response cache, ready rounds, coordinator (on its rank 0) and
 * executor, so a set whose members are busy or stalled never holds up another, and collectives
 * of different sets run at the same time (their tags differ, tags.ts). Ranks here are numbered
 * inside the set; the engine (engine.ts) maps them to the job's ranks on the wire.
 */
import type { Hierarchy } from '../algorithms/hierarchy.js';
import type { Hubs } from '../algorithms/hubs.js';
import { forcedAlgorithms } from '../core/algorithm_names.js';
import type { Config } from '../core/config.js';
import { fromErrorRecord, PeerFailureError, ShutdownError, toErrorRecord } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { runSoon } from '../core/soon.js';
import type { Timeline } from '../observability/timeline.js';
import type { Transport } from '../transport/transport.js';
import { type ExecutionResult, Executor, type ExecutorSettings } from './execution/executor.js';
import { GroupArrivals } from './negotiation/group_arrivals.js';
import { type Decision, Rank0Decisions } from './negotiation/rank0_decisions.js';
import { ResponseCache } from './negotiation/response_cache.js';
import { type Entry, TensorQueue } from './negotiation/tensor_queue.js';
import type { Membership } from './ops/op_spec.js';
import { specOf } from './ops/registry.js';
import type { BurstGate } from './ready/burst_gate.js';
import { exchangeModeFor } from './ready/ready_exchange_mode.js';
import { ReadyPath } from './ready/ready_path.js';
import type { StatsWriter } from './reporting/stats.js';
import type { FromEngine } from './threads/worker_protocol.js';
import { type AutotuneOptions, Autotuner } from './tuning/autotuner.js';
import { describe, largestThreshold, type SettingsChange } from './tuning/tuned_settings.js';
import type { ControlMessage, ExecuteResponse, Request, Response } from './wire/messages.js';

/** Messages of one set on the wire: each carries the set's id. */
export type SetMessage = ControlMessage & { type: 'requests' | 'responses' | 'ready' | 'ready-step' };

export interface SetEngineSettings {
  /** Defers the report of newly queued calls (EngineOptions.reportSoon); unset: runSoon. */
  reportSoon?: (task: () => void) => void;
  /** The set's id (0: the world). */
  id: number;
  /** This rank's rank in the set, and the set's size. */
  rank: number;
  size: number;
  /** The set's members: the job's ranks, in set order. */
  members: readonly number[];
  config: Config;
  kernels: ExecutorSettings['kernels'];
  /** The job's cost model (cost_probe.ts); unset: the built-in one. */
  costModel?: ExecutorSettings['costModel'];
  timeline: Timeline | undefined;
  /** rr.stats()'s counters (stats.ts); unset: not counted. */
  stats?: StatsWriter;
  /** The set's hosts as local and cross views, when its layout allows hierarchical collectives (algorithms/hierarchy.ts). */
  hierarchy?: Hierarchy | undefined;
  /** The set's hubs and their leaves, when it mixes browser ranks with Node ranks (algorithms/hubs.ts). */
  hubs?: Hubs | undefined;
  /** Every member is on one host, as the placements say (algorithms/options.ts). */
  oneHost?: boolean;
  /** The world only, with autotune on (tuning/): rank 0 searches, every member applies its changes. */
  autotune?: AutotuneOptions;
}

/** An entry as the engine queues it: stamped with its submission time (performance.now()). */
type Stamped = Entry & { submittedMs?: number };

export interface SetEngineHooks {
  /** Sends a message of this set to a member (set rank). */
  send(member: number, message: SetMessage): Promise<unknown>;
  /** Sends a message of this set to every other member (encoded once); settles once the OS has them all. */
  sendAll(message: SetMessage): Promise<unknown>;
  /** Settles a call on the caller's side. */
  post(message: FromEngine): void;
  /**
   * Settles a run's calls as done, each with its result (at its index; missing: none), counted
   * together; the entries in `skip` (stand-ins) are no calls.
   */
  done(entries: readonly Entry[], results: readonly ExecutionResult[], skip: ReadonlySet<Entry>): void;
  /** Breaks the job. */
  fail(error: unknown): void;
  /** The job's failure, if it broke. */
  failure(): Error | undefined;
  closing(): boolean;
  /** Fresh memory a finished call leaves for collection. */
  releasedFresh(bytes: number): void;
  /** World only: every rank asked to shut down. */
  allShutDown?(): void;
  /** World only: where the collectives that change the sets act. */
  membership?: Membership;
}

const kCoordinator = 0;

/** The stand-ins of a run without any (never added to). */
const kNoStandIns = new Set<Entry>();

export class SetEngine {
  private readonly queue = new TensorQueue();
  /** Members of cached groups queued before their whole group is (group_arrivals.ts). */
  private readonly arrivals = new GroupArrivals();
  private readonly executor: Executor;
  private readonly cache: ResponseCache;
  private readonly ready: ReadyPath;
  /** This set's rank 0 only. */
  private readonly rank0: Rank0Decisions | undefined;
  private outbox: Request[] = [];
  private flushScheduled = false;
  /** Runs executions one after another, in the agreed order. */
  private chain: Promise<void> = Promise.resolve();
  /** Rank 0's decisions received and not yet run: each waits until its round count is reached. */
  private readonly decisions: Decision[] = [];
  private advancing = false;
  private advanceAgain = false;
  private decisionsRun = 0;
  /** Decision messages received from the set's rank 0 (ready rounds may wait for them: ready_doubling.ts). */
  private decisionsReceived = 0;
  private readonly timeline: Timeline | undefined;
  /** Some rank of the set has joined (ops/join.ts): no ready rounds until the join completes. */
  private joinMode = false;
  /** Autotune's search: the world's rank 0 only. */
  private readonly tuner: Autotuner | undefined;

  constructor(
    private readonly settings: SetEngineSettings,
    view: Transport,
    private readonly hooks: SetEngineHooks,
    private readonly logger: Logger,
    /** Holds the report while the caller is still submitting (worker only; see burst_gate.ts). */
    private readonly burstGate?: BurstGate,
  ) {
    const { config, rank, size, autotune } = settings;
    const start = { fusionThresholdBytes: config.fusionThresholdBytes, burstHoldMs: config.burstHoldMs };
    // Resolved once here, off the per-call path: the choosers read one property.
    const forced = forcedAlgorithms(config.algorithms);
    this.timeline = settings.timeline;
    this.cache = new ResponseCache(config.cacheCapacity);
    this.executor = new Executor(view, {
      kernels: settings.kernels,
      ...(settings.costModel && { costModel: settings.costModel }),
      ...(forced && { algorithms: forced }),
      // The pool keeps the largest fused buffer autotune may ask for.
      fusionThresholdBytes: autotune ? largestThreshold(start) : config.fusionThresholdBytes,
      segmentBytes: config.segmentBytes,
      timeline: settings.timeline,
      processSet: settings.id,
      hierarchy: settings.hierarchy,
      hubs: settings.hubs,
      ...(settings.oneHost && { oneHost: true }),
      hierarchicalAllreduce: config.hierarchicalAllreduce,
      hierarchicalAllgather: config.hierarchicalAllgather,
      ...(hooks.membership ? { membership: hooks.membership } : {}),
    });
    if (rank === kCoordinator) {
      this.rank0 = new Rank0Decisions(
        { ...config, size },
        this.cache,
        this.queue,
        {
          rounds: () => this.ready,
          broadcast: (message) => this.broadcast(message),
          decided: (decision) => {
            this.decisions.push(decision);
            this.advance();
          },
          allShutDown: () => hooks.allShutDown?.(),
        },
        logger,
      );
    }
    this.ready = new ReadyPath(
      {
        rank,
        size,
        fusionThresholdBytes: config.fusionThresholdBytes,
        exchange: exchangeModeFor(config.readyExchange, size),
        forced,
      },
      this.cache,
      this.queue,
      this.executor,
      this.rank0?.stalls,
      {
        broadcast: (message) => void this.broadcast(message),
        send: (member, message) => {
          hooks.send(member, { ...message, set: settings.id } as SetMessage).catch((error) => hooks.fail(error));
        },
        // Pending means reported: requests not flushed yet (the burst gate may be holding them)
        // cannot be in an answer, so a rank with only those holds its answer until the flush.
        busy: () => this.queue.size > this.outbox.length || hooks.closing() || hooks.failure() !== undefined,
        schedule: (response) => this.schedule(response),
        post: (message) => hooks.post(message),
        releasedFresh: (bytes) => hooks.releasedFresh(bytes),
        agreed: (requests) => {
          if (this.timeline) this.markPhase(requests, 'NEGOTIATE', 'reportedUs', 'agreedUs');
          this.countNegotiated(requests, true);
        },
        decisions: () => this.rank0?.published ?? this.decisionsReceived,
        fail: (error) => hooks.fail(error),
        advance: () => this.advance(),
      },
    );
    if (autotune) {
      settings.stats?.autotune({ ...start, trial: 1, done: false, score: 0 });
      if (this.rank0) {
        const rank0 = this.rank0;
        this.tuner = new Autotuner(start, autotune, {
          publish: (change) => rank0.publishSettings(change),
          info: (message) => logger.info(message),
        });
      }
    }
  }

  get id(): number {
    return this.settings.id;
  }

  /** Collectives submitted here and not yet settled. */
  get pending(): number {
    return this.queue.size;
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

  /** Settles when rank 0's last published message is with the OS (shutdown waits for it). */
  get lastPublish(): Promise<unknown> {
    return this.rank0?.lastPublish ?? Promise.resolve();
  }

  enqueue(entry: Entry): void {
    if (this.timeline) entry.queuedUs = this.timeline.now();
    this.queue.add(entry);
    this.outbox.push(entry.request);
    // Requests the caller made in one burst reach the coordinator as one report.
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      const gate = this.burstGate;
      (this.settings.reportSoon ?? runSoon)(() => (gate ? gate.whenIdle(() => this.flush()) : this.flush()));
    }
  }

  /** A message of this set from member `from` (set rank). */
  onMessage(from: number, message: SetMessage): void {
    if (message.type === 'requests') this.rank0?.onRequests(from, message.requests);
    else if (message.type === 'ready' || message.type === 'ready-step') {
      this.ready.onReport(from, message);
      this.advance();
    } else if (from === kCoordinator) this.onDecision(message);
  }

  /** World only: member `rank` has asked to shut down (or left while this rank shuts down). */
  onShutdownReport(rank: number): void {
    this.rank0?.onShutdown(rank);
  }

  /** Rejects every queued collective with `error` (or the error it makes for each); running ones finish (or fail with the job). */
  failAll(error: Error | ((request: Request) => Error)): void {
    this.outbox = [];
    this.ready.clear();
    this.arrivals.clear();
    for (const entry of this.queue.drain()) {
      const record = toErrorRecord(typeof error === 'function' ? error(entry.request) : error);
      this.hooks.post({ type: 'failed', id: entry.id, error: record });
    }
  }

  /** Settles once the collectives already running have finished. */
  settled(): Promise<void> {
    return this.chain;
  }

  close(): void {
    this.ready.close();
    this.rank0?.close();
    this.executor.close();
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.hooks.failure()) return;
    const requests = this.outbox;
    this.outbox = [];
    if (this.timeline) this.markPhase(requests, 'QUEUE', 'queuedUs', 'reportedUs');
    const uncached: Request[] = [];
    for (const request of requests) {
      const id = this.joinMode ? undefined : this.cache.idOf(request);
      if (id === undefined) uncached.push(request);
      // A cached group is ready once every member is.
      else if (request.group === undefined || this.arrivals.arrive(id, request)) this.ready.add(id);
    }
    if (uncached.length > 0) this.sendToCoordinator(uncached);
    this.settings.stats?.requests(requests.length - uncached.length, uncached.length);
    this.advance();
  }

  /**
   * Runs what can run: rank 0's decisions whose round has come, and ready rounds as they close,
   * in that interleaving (rank0_decisions.ts says why it is the same on every member). Called
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
          if (this.hooks.failure() || !this.ready.closeNext()) break;
        }
      } while (this.advanceAgain);
    } finally {
      this.advancing = false;
    }
    this.ready.armAnswerTimer();
  }

  /**
   * Stats: a run (or, `eager`, each eager collective) was agreed; its negotiation counts from its
   * earliest submission. Names this rank no longer holds are skipped.
   */
  private countNegotiated(named: readonly ({ name: string } | string)[], eager: boolean): void {
    const stats = this.settings.stats;
    if (!stats) return;
    const now = performance.now();
    let earliest = now;
    for (const item of named) {
      const entry = this.queue.get(typeof item === 'string' ? item : item.name) as Stamped | undefined;
      const at = entry?.submittedMs;
      if (at === undefined) continue;
      if (eager) stats.negotiated(now - at, true);
      else if (at < earliest) earliest = at;
    }
    if (!eager && earliest < now) stats.negotiated(now - earliest, false);
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

  private sendToCoordinator(requests: Request[]): void {
    if (this.rank0) {
      this.rank0.onRequests(this.settings.rank, requests);
      return;
    }
    this.hooks.send(kCoordinator, { type: 'requests', set: this.settings.id, requests }).catch((error) => this.hooks.fail(error));
  }

  /** Sends `message` (a fresh object: it is stamped with the set's id) to every other member; settles once the OS has them all. */
  private broadcast(message: ControlMessage): Promise<unknown> {
    (message as { set?: number }).set = this.settings.id;
    return this.hooks.sendAll(message as SetMessage);
  }

  private onDecision(message: SetMessage): void {
    if (message.type !== 'responses') return;
    this.decisionsReceived++;
    const responses: Response[] = [];
    for (const r of message.responses) {
      const response = r.kind === 'cached' ? this.cache.expand(r.ids) : r;
      if (!response) {
        const rank0 = this.settings.members[kCoordinator] as number;
        this.hooks.fail(new PeerFailureError(`rank ${rank0} sent a response cache id this rank does not hold`, rank0));
        return;
      }
      responses.push(response);
    }
    const change = message.settings && { settings: message.settings };
    this.decisions.push({ afterRounds: message.afterRounds, evict: message.evict, responses, ...change });
    this.advance();
  }

  /** Runs one batch of rank 0's decisions, at its agreed place (see rank0_decisions.ts). */
  private runDecision(decision: Decision): void {
    this.decisionsRun++;
    if (decision.settings) this.retune(decision.settings);
    const resend: Request[] = [];
    for (const id of decision.evict) {
      const request = this.cache.request(id);
      const group = this.cache.group(id);
      this.cache.evict(id);
      const wasReady = this.ready.evict(id);
      const arrived = this.arrivals.take(id);
      // A group's members go to rank 0 in full: all of them if it was ready, else those that arrived.
      if (group) resend.push(...(wasReady ? this.queuedRequests(group.members) : arrived));
      else if (wasReady && request) resend.push(...this.queuedRequests([request]));
    }
    /** Grouped calls that ran whole in this decision, by group name: cached as one id each. */
    let groups: Map<string, Request[]> | undefined;
    for (const r of decision.responses) {
      // Learned in decision order on every member, so every member assigns the same ids; not
      // what joined ranks stand in for (they hold no request for it).
      if (r.kind === 'execute' && !r.joined) {
        const requests = r.names.map((name) => this.queue.get(name)?.request);
        this.cache.learn(requests);
        for (const request of requests) {
          if (request?.group === undefined) continue;
          groups ??= new Map();
          const members = groups.get(request.group.name);
          if (members) members.push(request);
          else groups.set(request.group.name, [request]);
        }
      }
      this.schedule(r);
    }
    if (groups) for (const members of groups.values()) this.cache.learnGroup(members);
    if (resend.length > 0) this.sendToCoordinator(resend);
  }

  /** The requests of the queued entries named as `requests` are (this rank's submissions of them). */
  private queuedRequests(requests: readonly Request[]): Request[] {
    const queued: Request[] = [];
    for (const { name } of requests) {
      const entry = this.queue.get(name);
      if (entry) queued.push(entry.request);
    }
    return queued;
  }

  /**
   * Autotune's change, at its place in the agreed order: rounds closed from here on plan fusion
   * with the new threshold on every member alike (rank 0's own decisions carry their plan).
   */
  private retune(change: SettingsChange): void {
    this.ready.fusionThresholdBytes = change.fusionThresholdBytes;
    if (this.rank0) this.rank0.fusionThresholdBytes = change.fusionThresholdBytes;
    // The hold only shapes when this rank reports, never what runs: it needs no agreement, but
    // switching here keeps every rank's trial the same.
    if (this.burstGate) this.burstGate.maxHoldMs = change.burstHoldMs;
    this.settings.stats?.autotune(change);
    this.tuner?.applied(change);
    if (change.done && !this.tuner) this.logger.debug(`autotune: done: ${describe(change)}`);
  }

  private schedule(response: Response): void {
    if (response.kind === 'joined') {
      this.enterJoinMode();
      return;
    }
    // The join's own response ends join mode, at this same place on every member.
    if (response.kind === 'execute' && response.request.op === 'join') this.joinMode = false;
    if (response.kind === 'error') {
      const error = fromErrorRecord({ kind: response.errorKind, message: response.message });
      // A stall fails the submissions that waited; this rank's entry, if it was not one of them,
      // is a newer submission that reached this rank before the error did, and it stays.
      const ours = response.ranks === undefined || response.ranks.includes(this.settings.rank);
      for (const name of response.names) {
        const entry = ours ? this.queue.take(name) : undefined;
        if (entry) this.hooks.post({ type: 'failed', id: entry.id, error: toErrorRecord(error) });
        // A cached tensor that stalled: every member drops it from the open round at this same
        // place, and a newer submission is reported again, with its data.
        const id = this.cache.idOfName(name);
        if (id === undefined) continue;
        this.ready.failed(id, ours);
        if (ours) this.arrivals.forget(id);
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
    this.countNegotiated(response.names, false);
    this.chain = this.chain.then(() => this.run(response));
  }

  /**
   * A rank of the set joined: from this place in the agreed order on, every request goes to rank 0
   * in full (a joined rank reports nothing ready, so no round would agree), those already ready
   * in the rounds included.
   */
  private enterJoinMode(): void {
    if (this.joinMode) return;
    this.joinMode = true;
    const resend: Request[] = [];
    for (const id of this.ready.withdrawAll(this.cache.size)) {
      const group = this.cache.group(id);
      const request = this.cache.request(id);
      resend.push(...this.queuedRequests(group ? group.members : request ? [request] : []));
    }
    // Members of groups not ready yet go too.
    resend.push(...this.arrivals.takeAll());
    if (resend.length > 0) this.sendToCoordinator(resend);
  }

  /** This rank has joined and holds nothing for `response`: neutral data of the agreed shape. */
  private standIn(response: ExecuteResponse): Entry | undefined {
    if (!response.joined?.includes(this.settings.rank)) return undefined;
    const support = specOf(response.request).joined;
    if (!support) return undefined;
    // No call of the caller's: its id is never posted (run() knows stand-ins by their set).
    return { id: 0, ...support.standIn(response) };
  }

  private async run(response: ExecuteResponse): Promise<void> {
    const entries: Entry[] = [];
    // Only a joined rank has stand-ins: the steady state makes no set.
    let standIns: Set<Entry> = kNoStandIns;
    for (const name of response.names) {
      const queued = this.queue.take(name);
      const entry = queued ?? this.standIn(response);
      // Missing only once this rank has failed or begun shutting down; the peers will see it.
      if (!entry) continue;
      entries.push(entry);
      if (!queued) {
        if (standIns === kNoStandIns) standIns = new Set<Entry>();
        standIns.add(entry);
      }
    }
    if (entries.length === 0) return;
    const failure = this.hooks.failure();
    if (failure || entries.length !== response.names.length) {
      const error = toErrorRecord(failure ?? new ShutdownError('ringreduce was shut down while this collective was pending'));
      for (const entry of entries) if (!standIns.has(entry)) this.hooks.post({ type: 'failed', id: entry.id, error });
      return;
    }
    if (this.timeline) {
      const now = this.timeline.now();
      for (const e of entries)
        if (e.agreedUs !== undefined) this.timeline.span(e.request.name, 'WAIT', e.agreedUs, now - e.agreedUs);
    }
    try {
      const started = performance.now();
      const results = await this.executor.execute(response, entries);
      this.settings.stats?.executed(entries.length - standIns.size, performance.now() - started);
      if (this.tuner) {
        let bytes = 0;
        for (const entry of entries) if (!standIns.has(entry)) bytes += entry.buffer?.byteLength ?? 0;
        this.tuner.completed(entries.length - standIns.size, bytes);
      }
      this.hooks.done(entries, results, standIns);
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i] as Entry;
        // Only fresh memory: reused buffers (`out`, pools) need no collection to come back.
        const fresh = (entry.fresh ? (entry.buffer?.byteLength ?? 0) : 0) + (results[i]?.output?.byteLength ?? 0);
        if (fresh > 0 && !standIns.has(entry)) this.hooks.releasedFresh(fresh);
      }
    } catch (error) {
      const failed = toErrorRecord(this.hooks.failure() ?? error);
      for (const entry of entries) if (!standIns.has(entry)) this.hooks.post({ type: 'failed', id: entry.id, error: failed });
      if (!this.hooks.failure()) this.hooks.fail(error);
    }
  }
}
