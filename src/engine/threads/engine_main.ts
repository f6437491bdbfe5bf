/**
 * The engine thread's life, whatever hosts it: connects the transport, then feeds the caller's
 * messages to the Engine and settles each call back to the caller's thread, bumping the shared
 * signal so that a caller blocked in a ...Sync call wakes up.
 *
 * An entry supplies the host: a Node worker thread (worker.ts) or a browser's module Web Worker
 * (web_worker.ts). The host says how messages travel, where log lines go, which backends it can
 * start, and what else it offers (a timeline file, a garbage collector, the dashboard reporter
 * watching the engine); this module holds what is the same everywhere.
 */
import type { Config } from '../../core/config.js';
import { InvalidArgumentError, TimeoutError, toErrorRecord } from '../../core/errors.js';
import { joinedBecause } from '../../core/job_source.js';
import type { Logger } from '../../core/logger.js';
import type { Collect } from '../../core/shared_memory_reclaimer.js';
import { afterThisTask, runSoon } from '../../core/soon.js';
import type { Timeline } from '../../observability/timeline.js';
import type { BackendFactory, TransportHandle } from '../../transport/backend.js';
import type { BackendName } from '../../transport/backends.js';
import { jobCostModel } from '../cost_probe.js';
import { Engine } from '../engine.js';
import type { Entry } from '../negotiation/tensor_queue.js';
import { BurstGate } from '../ready/burst_gate.js';
import { StatsWriter } from '../reporting/stats.js';
import { SettingsAgreement } from '../settings_agreement.js';
import { exchangeTopology, type Topology } from '../topology.js';
import { GroupCalls } from './group_calls.js';
import { EngineRings, type RingCall } from './hand_off.js';
import { type Settlement, SyncMailboxWriter } from './sync_mailbox.js';
import {
  type EngineInit,
  type FromEngine,
  type GroupBinding,
  hasResult,
  kSignalBurst,
  kSignalCompletions,
  type Submission,
  type ToEngine,
} from './worker_protocol.js';

/** The backends an entry can start, and its rule for choosing one. */
export interface EngineBackends {
  /** The factories, by name: Node's has tcp, mpi and solo (transport/backends.ts); a browser's fewer. */
  readonly table: Readonly<Partial<Record<BackendName, BackendFactory>>>;
  /** The backend this rank's configuration asks for. */
  choose(config: Config, log: Logger): Promise<BackendName>;
}

/** Who watches the engine from the side (Node: the dashboard reporter). */
export interface EngineObserver {
  /** The engine is connected and runs. */
  started?(engine: Engine): void;
  /** The engine could not start, for `error` (told before the caller hears it). */
  failed?(error: Error): void;
  /** The engine has stopped; awaited before the caller hears 'closed'. */
  stopped?(): Promise<void>;
}

export interface EngineHost {
  readonly init: EngineInit;
  /** A browser's engine: its rank is a leaf of the hub collectives (algorithms/hubs.ts). */
  readonly browser?: boolean;
  readonly logger: Logger;
  readonly backends: EngineBackends;
  /** Calls `onMessage` with each message of the caller, in order, until the returned function is called. */
  listen(onMessage: (message: ToEngine) => void): () => void;
  /**
   * Takes at once what the caller has posted and was not delivered yet (Node:
   * receiveMessageOnPort), so that the submissions of a burst join its first call's report.
   * Unset (a browser): they arrive as messages, and join the next report.
   */
  takePosted?(): ToEngine[];
  /** Posts the completions of one turn to the caller, as one message. */
  post(batch: FromEngine[]): void;
  /**
   * Defers a report so the rest of a burst joins it (EngineOptions.reportSoon). Unset: the
   * next turn of the event loop, by which a worker's channel has delivered the burst.
   */
  reportSoon?(task: () => void): void;
  /** Nothing more will be posted: closes the channel to the caller. */
  close(): void;
  /** The trace of this rank's phases, when the configuration asks for one and the host can write it. */
  openTimeline?(config: Config, warn: (message: string) => void): Timeline | undefined;
  /** Autotune's CSV log (observability/autotune_log.ts), when the host can write files. */
  openAutotuneLog?(path: string, warn: (message: string) => void): (line: string) => void;
  /** This thread's garbage collector (SharedMemoryReclaimer); unset: none is forced. */
  readonly collect?: Collect;
  readonly observer?: EngineObserver;
}

/**
 * Where completions go: batched, one message per synchronous run of the engine (a fused step's
 * hundred tensors wake the caller once, not a hundred times); a ring call's plain completion to
 * the completion ring (hand_off.ts); the newest ...Sync call's to the mailbox, when the caller has
 * one.
 */
class Settler {
  private outgoing: FromEngine[] = [];
  private wrote = false;
  /** Completions were written to the hand-off ring since the last flush. */
  private ringWritten = false;
  private scheduled = false;
  /** The newest submission of a ...Sync call: only its completion goes to the mailbox (see sync_mailbox.ts). */
  private newestSync = 0;
  private readonly mailbox: SyncMailboxWriter | undefined;
  private readonly flushSoon = () => this.flush();
  /** Group calls of the ring: their members settle into one completion. */
  readonly groups = new GroupCalls();

  constructor(
    private readonly host: EngineHost,
    private readonly rings: EngineRings,
  ) {
    const { mailbox } = host.init;
    this.mailbox = mailbox && new SyncMailboxWriter(mailbox);
  }

  /** Call `id` was made by a ...Sync call. */
  expectSync(id: number): void {
    if (this.mailbox) this.newestSync = id;
  }

  post(member: FromEngine): void {
    const message = this.groups.settle(member);
    if (message === undefined) return;
    if (this.mailbox && (message.type === 'done' || message.type === 'failed') && message.id === this.newestSync) {
      this.mailbox.write(message as Settlement);
      this.wrote = true;
    } else if (message.type === 'done' && message.id < 0 && isPlain(message) && this.rings.complete(message.id)) {
      this.wrote = true;
      this.ringWritten = true;
    } else {
      this.outgoing.push(message);
    }
    if (!this.scheduled) {
      this.scheduled = true;
      afterThisTask(this.flushSoon);
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.outgoing.length === 0 && !this.wrote) return;
    if (this.outgoing.length > 0 || this.ringWritten) {
      // An empty batch wakes the caller for the ring's completions: a message wakes a waiting
      // thread sooner than Atomics.waitAsync does here (docs/performance.md).
      const messages = this.outgoing;
      this.outgoing = [];
      this.host.post(messages);
    }
    this.wrote = false;
    this.ringWritten = false;
    const { signal } = this.host.init;
    Atomics.add(signal, kSignalCompletions, 1);
    Atomics.notify(signal, kSignalCompletions);
  }

  /** The last message: the channel closes, and a caller blocked in a ...Sync call stops waiting. */
  finish(message: FromEngine): void {
    this.post(message);
    this.mailbox?.stop();
    this.flush();
    this.host.close();
  }
}

/** A completion that hands the caller nothing but itself (the result is in the caller's memory). */
function isPlain(done: FromEngine & { type: 'done' }): boolean {
  return !hasResult(done) && done.members === undefined;
}

/**
 * Said at once when another launcher's variables made this process a rank (a warning when they
 * look left over, as RANK and WORLD_SIZE in a container's environment), and again in a
 * start-up timeout: a process that waits for peers that never come should say why it waits.
 */
function sayWhyJoined(config: Config, logger: Logger): string | undefined {
  const source = config.jobSource;
  if (source === undefined) return undefined;
  const because = joinedBecause(source, config.rank, config.size);
  if (source.suspicious !== undefined) logger.warn(`joining a job as ${because}`);
  else logger.info(`joining a job as ${because}`);
  return because;
}

/** This rank's transport, from the backend its configuration chooses. */
async function connect(host: EngineHost): Promise<{ backend: BackendName; connection: TransportHandle }> {
  const { config } = host.init;
  const backend = await host.backends.choose(config, host.logger);
  const factory = host.backends.table[backend];
  if (factory === undefined) throw new InvalidArgumentError(`the ${backend} backend is not available here`);
  return { backend, connection: await factory(config, host.logger) };
}

/** Runs the engine of `host` until the caller shuts it down (or it fails to start). */
export async function runEngine(host: EngineHost): Promise<void> {
  const { config, signal, stats } = host.init;
  const { logger, observer } = host;
  const rings = new EngineRings(host.init.handOff);
  const settler = new Settler(host, rings);
  const because = sayWhyJoined(config, logger);
  let backend: BackendName;
  let connection: TransportHandle;
  let topology: Topology;
  let costModel: Awaited<ReturnType<typeof jobCostModel>>;
  let probeMs = 0;
  try {
    ({ backend, connection } = await connect(host));
    const { transport } = connection;
    [topology, costModel] = await (async () => {
      // Before anything else runs on the settings (the cost probe is the first): ranks that
      // disagree would hang or compute wrongly, so every rank's init() fails naming what differs.
      const agreement = new SettingsAgreement(host.init.agreedSettings);
      const found = await exchangeTopology(transport, config, host.browser === true, agreement.stamp);
      await agreement.check(transport, found.stamps);
      const started = performance.now();
      const model = await jobCostModel(transport, config.costModel);
      probeMs = performance.now() - started;
      return [found, model] as const;
    })().catch(async (error) => {
      await connection.close();
      throw error;
    });
  } catch (error) {
    if (because !== undefined && error instanceof TimeoutError) error.message += ` (this process is ${because})`;
    observer?.failed?.(error as Error);
    settler.finish({ type: 'init-failed', error: toErrorRecord(error) });
    return;
  }
  /** Bound submissions by slot: later calls of each come through the ring (hand_off.ts). */
  const bound = new Map<number, Submission>();
  /** Bound groups by slot: their members' submissions, in member order. */
  const boundGroups = new Map<number, Submission[]>();
  const submit = (submission: Submission) => {
    if (submission.sync) settler.expectSync(submission.id);
    engine.enqueue(submission);
  };
  const bindGroup = ({ slot, members, drop }: GroupBinding) => {
    if (drop !== undefined) boundGroups.delete(drop);
    const submissions = members.map((member) => bound.get(member));
    // The caller binds a group only after its members, in the same message or before.
    if (submissions.includes(undefined)) throw new Error(`group slot ${slot} names a member slot that is not bound`);
    boundGroups.set(slot, submissions as Submission[]);
  };
  const enqueue = (message: ToEngine & { type: 'enqueue' }) => {
    // First the ring calls written before this message was posted: a slot it drops may be theirs.
    rings.takeSubmissions(takeRingCall);
    for (const submission of message.submissions) {
      if (submission.drop !== undefined) bound.delete(submission.drop);
      if (submission.slot !== undefined) bound.set(submission.slot, submission);
      submit(submission);
    }
    if (message.groups !== undefined) for (const group of message.groups) bindGroup(group);
    // A ring call of a slot bound by this message may be waiting for it.
    takeRing();
  };
  /** Readies a bound submission for its next call, under a new id (one call per name is in flight). */
  const restamp = (submission: Submission, id: number, sync: boolean) => {
    submission.id = id;
    submission.sync = sync;
    // The timeline's marks of the previous call are not this one's.
    const entry = submission as Entry;
    if (entry.queuedUs !== undefined) entry.queuedUs = entry.reportedUs = entry.agreedUs = undefined;
  };
  /** A ring call: a bound submission again, or a bound group's members (under the ids below the group's). */
  const takeRingCall = (call: RingCall): boolean => {
    const submission = bound.get(call.slot);
    if (submission !== undefined) {
      restamp(submission, call.id, call.sync);
      submit(submission);
      return true;
    }
    const members = boundGroups.get(call.slot);
    if (members === undefined) return false;
    settler.groups.start(call.id, members.length);
    for (let index = 0; index < members.length; index++) restamp(members[index] as Submission, call.id - 1 - index, false);
    engine.enqueueAll(members);
    return true;
  };
  const takeRing = () => {
    rings.takeSubmissions(takeRingCall);
  };
  // The submissions a burst posted before lowering its flag are queued on the channel already.
  const takePosted = host.takePosted;
  const drainSubmissions = () => {
    if (takePosted !== undefined) {
      for (const message of takePosted()) {
        if (message.type === 'enqueue') enqueue(message);
        else if (message.type === 'ring') takeRing();
        else runSoon(() => onMessage(message));
      }
    }
    rings.takeSubmissions(takeRingCall);
  };
  // With autotune the gate exists even at a hold of 0: the search may raise it.
  const gate =
    config.burstHoldMs > 0 || config.autotune
      ? new BurstGate(signal, kSignalBurst, config.burstHoldMs, drainSubmissions)
      : undefined;
  const { hosts, browsers } = topology;
  if (costModel !== undefined) {
    const figures = Object.entries(costModel).map(
      ([name, seconds]) => `${name} = ${((seconds as number) * 1e9).toPrecision(3)} ns`,
    );
    const how = config.costModel === 'measure' ? ` (rank 0's measurement, in ${probeMs.toFixed(1)} ms)` : '';
    logger.info(`the choices by cost take ${figures.join(', ')}${how}`);
  }
  if (hosts === undefined) logger.info("the launcher's placements do not say which host each rank is on: collectives run flat");
  const timeline = host.openTimeline?.(config, (message) => logger.warn(message));
  const autotuneLog = config.autotune && config.autotuneLog !== undefined && config.rank === 0 ? config.autotuneLog : undefined;
  if (autotuneLog !== undefined && !host.openAutotuneLog)
    logger.warn('RINGREDUCE_AUTOTUNE_LOG is ignored: this host cannot write files');
  const log = autotuneLog !== undefined ? host.openAutotuneLog?.(autotuneLog, (message) => logger.warn(message)) : undefined;
  const engine = new Engine(config, connection.transport, (message) => settler.post(message), logger, {
    ...(gate && { burstGate: gate }),
    ...(host.reportSoon && { reportSoon: (task: () => void) => host.reportSoon?.(task) }),
    stats: new StatsWriter(stats),
    ...(hosts && { hosts }),
    ...(browsers.includes(true) && { browsers }),
    ...(costModel && { costModel }),
    ...(timeline && { timeline }),
    ...(config.autotune && { autotune: log ? { log } : {} }),
    ...(host.collect && { collect: host.collect }),
  });
  observer?.started?.(engine);
  let stopListening = () => {};
  const onMessage = (message: ToEngine): void => {
    if (message.type === 'enqueue') {
      enqueue(message);
      return;
    }
    if (message.type === 'ring') {
      takeRing();
      return;
    }
    stopListening();
    void shutdown();
  };
  const shutdown = async (): Promise<void> => {
    try {
      await engine.shutdown();
      await connection.close();
    } catch (error) {
      logger.warn(`shutdown: ${(error as Error).message}`);
    }
    await observer?.stopped?.();
    settler.finish({ type: 'closed' });
  };
  stopListening = host.listen(onMessage);
  settler.post({ type: 'ready', backend });
}
