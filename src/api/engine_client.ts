/**
 * The caller's side of the engine: starts the engine's thread (through the platform: a Node
 * worker thread, or a browser's module Web Worker that ringrun's page starts), hands it
 * requests, and settles each call when the engine posts its completion. A caller blocked in a
 * ...Sync call cannot run its event loop: it sleeps in Atomics.wait on a shared counter that the
 * engine bumps after each post (after a bounded spin: spin_wait.ts), and then takes the
 * completion without it (EngineThread.takeSync: Node drains the port, a browser reads the sync
 * mailbox).
 *
 * A call that repeats the last call of its name on the same memory (a training loop's steady
 * state) travels through shared memory instead (engine/threads/hand_off.ts): its slot and id in a ring,
 * and its completion back the same way (bindings.ts says which calls). A grouped call that
 * repeats is one entry of the ring, and one completion, whatever its number of members.
 *
 * The engine keeps the process alive only while a call is pending, so a script that forgets
 * shutdown() still exits.
 */
import { agreedConfigText } from '../core/agreed_settings.js';
import { CallTable } from '../core/call_table.js';
import type { Config } from '../core/config.js';
import { fromErrorRecord, type RingReduceError, ShutdownError, TimeoutError } from '../core/errors.js';
import { afterThisTask } from '../core/soon.js';
import type { TypedArray } from '../core/types.js';
import type { PeerRequest } from '../engine/execution/point_to_point.js';
import { createStatsBuffer } from '../engine/reporting/stats.js';
import { CallerRings, createHandOff } from '../engine/threads/hand_off.js';
import {
  type CallResult,
  type EngineInit,
  type FromEngine,
  type GroupBinding,
  kSignalBurst,
  kSignalCompletions,
  type Submission,
  type ToEngine,
} from '../engine/threads/worker_protocol.js';
import type { Request } from '../engine/wire/messages.js';
import type { EngineThread, Platform } from '../platform/platform.js';
import type { BackendName } from '../transport/backends.js';
import { Bindings } from './bindings.js';
import { waitForChange } from './spin_wait.js';

/** Tells the engine that calls wait in the hand-off ring (one object: nothing allocated per call). */
const kRingWritten: ToEngine = Object.freeze({ type: 'ring' });

export interface Completion extends CallResult {
  /** A group call's member results (group_calls.ts), when one has any. */
  members?: (CallResult | undefined)[];
}

/** A member's completion that hands back nothing (its result is in the caller's memory). */
const kPlainCompletion: Completion = Object.freeze({});

/** The member completions of a group call's completion, in member order. */
function memberCompletions(completion: Completion, size: number): Completion[] {
  const completions = new Array<Completion>(size);
  for (let index = 0; index < size; index++) completions[index] = completion.members?.[index] ?? kPlainCompletion;
  return completions;
}

/** One collective handed to the engine (the submission of worker_protocol.ts, before it has an id). */
export interface Call {
  request: Request | PeerRequest;
  /** What the engine works on (see Submission.buffer). */
  buffer: TypedArray | undefined;
  /** Allgather with option 'out': where the result goes. */
  output?: TypedArray;
  /** `buffer` is fresh memory the engine may help free once done (see Submission.fresh). */
  fresh?: boolean;
  /** The process set of a collective; unset: the world. */
  set?: number;
  /** Runs once the engine no longer uses `buffer` (before the call settles). */
  released?: () => void;
}

/**
 * What the facade needs of an engine: the worker-thread client below, or an engine running in
 * the caller's own thread (test/helpers: N ranks in one thread over the memory transport).
 */
export interface EngineLink {
  /** Submits a call; the promise settles when every rank has run it (or it failed). */
  submit(call: Call): Promise<Completion>;
  /** Submits a call and blocks this thread until it settles. */
  submitSync(call: Call): Completion;
  /**
   * Submits several calls in one go (a grouped call's members); settles with their completions in
   * order once all have completed, or with the first failure. Unset: submit each.
   */
  submitAll?(calls: readonly Call[]): Promise<Completion[]>;
  shutdown(): Promise<void>;
  /** The backend the engine connected with (unset for engines of tests, in this thread). */
  readonly backend?: BackendName;
  /** The engine's counters, for rr.stats() (engine/reporting/stats.ts). */
  readonly statsBuffer?: SharedArrayBuffer;
  /** The engine runs on the caller's thread, which therefore must not block in a ...Sync call. */
  readonly engineOnCallerThread?: boolean;
}

interface PendingCall {
  resolve: (completion: Completion) => void;
  reject: (error: Error) => void;
  /** The engine is done with the call's memory (it settled it, or it is gone). */
  released?: () => void;
}

/**
 * The calls of one submitAll: settled together once every one has, in order, or with the first
 * failure (not at it: the caller keeps the names in flight until the last member is out of the
 * engine, which reuses a bound member's submission for the next call of its name).
 */
class PendingGroup {
  private readonly completions: Completion[];
  private left: number;
  private failure: Error | undefined;
  private resolve: ((completions: Completion[]) => void) | undefined;
  private reject: ((error: Error) => void) | undefined;

  constructor(size: number) {
    this.completions = new Array<Completion>(size);
    this.left = size;
  }

  /** The promise's functions, once the calls are submitted (none can have settled before). */
  settleWith(resolve: (completions: Completion[]) => void, reject: (error: Error) => void): void {
    this.resolve = resolve;
    this.reject = reject;
  }

  done(index: number, completion: Completion): void {
    this.completions[index] = completion;
    this.settled();
  }

  readonly fail = (error: Error): void => {
    this.failure ??= error;
    this.settled();
  };

  private settled(): void {
    if (--this.left > 0) return;
    if (this.failure !== undefined) this.reject?.(this.failure);
    else this.resolve?.(this.completions);
  }
}

export class EngineClient implements EngineLink {
  private readonly pending = new CallTable<PendingCall>();
  /** The call submit() is making and its id, read by keepPending. */
  private submitting: Call | undefined;
  private submittingId = 0;
  /** Ids of calls sent as messages count up from 1; those of ring calls down from -1 (hand_off.ts). */
  private nextId = 1;
  private nextRingId = -1;
  /** Ring calls pending: while there are any, a batch from the engine is preceded by the ring's completions. */
  private ringPending = 0;
  private readonly rings: CallerRings;
  private readonly bindings = new Bindings();
  private closed = false;
  private onReady: PendingCall | undefined;
  private onClosed: (() => void) | undefined;
  private connectedWith: BackendName | undefined;
  /** The second and later submissions of the current synchronous burst, posted together once it ends. */
  private burst: Submission[] = [];
  /** Groups bound in the current burst, posted with its submissions. */
  private burstGroups: GroupBinding[] = [];
  private inBurst = false;
  /** The burst's first call was not posted at once: submitAll's burst, posted whole at its end. */
  private heldFirst = false;
  /** Calls of the current burst so far, ring calls included. */
  private burstCalls = 0;
  /** How many calls the last burst made (see post). */
  private lastBurstCalls = 1;
  /** Counts bursts, so that the microtask of a burst ended early (by a ...Sync call) does nothing. */
  private bursts = 0;
  private readonly thread: EngineThread;
  /** What keepAlive was last told (it is told only changes). */
  private keptAlive: boolean | undefined;
  private readonly signal: Int32Array;
  /** The counters the engine writes and rr.stats() reads. */
  readonly statsBuffer: SharedArrayBuffer;
  readonly engineOnCallerThread: boolean;

  private constructor(
    platform: Platform,
    init: EngineInit & { stats: SharedArrayBuffer },
    private readonly syncTimeoutMs: number,
  ) {
    this.signal = init.signal;
    this.statsBuffer = init.stats;
    this.engineOnCallerThread = !init.config.engineThread;
    this.rings = new CallerRings(init.handOff);
    this.thread = platform.startEngine(init, {
      messages: (batch) => this.dispatchAll(batch),
      gone: (error) => this.die(error),
    });
  }

  /** The backend the engine connected with, once started. */
  get backend(): BackendName | undefined {
    return this.connectedWith;
  }

  /** Starts the engine on `platform` and resolves once it has joined the job (rendezvous and connections done). */
  static async start(config: Config, platform: Platform): Promise<EngineClient> {
    const init = {
      config,
      agreedSettings: agreedConfigText(config),
      signal: new Int32Array(new SharedArrayBuffer(8)),
      stats: createStatsBuffer(),
      handOff: createHandOff(),
    };
    const syncTimeoutMs = (config.stallTimeoutMs > 0 ? config.stallTimeoutMs : 600_000) + config.ioTimeoutMs + 5_000;
    const client = new EngineClient(platform, init, syncTimeoutMs);
    await new Promise<Completion>((resolve, reject) => {
      client.onReady = { resolve, reject };
    });
    client.updateRefs();
    return client;
  }

  /** Submits a call; the promise settles when every rank has run it (or it failed). */
  submit(call: Call): Promise<Completion> {
    this.submittingId = this.postOrRelease(call, false);
    this.submitting = call;
    return new Promise<Completion>(this.keepPending);
  }

  /** The executor of submit()'s promise, one for every call (a closure per call would be allocated per call). */
  private readonly keepPending = (resolve: (completion: Completion) => void, reject: (error: Error) => void): void => {
    const released = this.submitting?.released;
    this.submitting = undefined;
    this.pending.set(this.submittingId, released ? { resolve, reject, released } : { resolve, reject });
    this.updateRefs();
  };

  /**
   * Submits several calls in one go; one promise for all of them (a promise per member, gathered
   * by Promise.all, would be allocated per member of every grouped call). Outside a burst they
   * reach the engine in one message once all are written, not the first at once and the rest
   * after (see post): the engine wakes once for the group.
   */
  submitAll(calls: readonly Call[]): Promise<Completion[]> {
    const ownBurst = !this.inBurst;
    if (ownBurst) {
      this.inBurst = true;
      this.heldFirst = true;
      this.burstCalls = 0;
    }
    try {
      return this.submitGroupCall(calls) ?? this.submitMembers(calls);
    } finally {
      if (ownBurst) this.endBurst();
      this.updateRefs();
    }
  }

  /** A bound group's call as one entry of the ring (bindings.ts); undefined when the group is not bound or the ring is full. */
  private submitGroupCall(calls: readonly Call[]): Promise<Completion[]> | undefined {
    const slot = this.bindings.groupSlotOf(calls);
    if (slot === undefined) return undefined;
    this.refuseIfClosed((calls[0] as Call).request);
    const size = calls.length;
    // The group's id, and below it its members' (group_calls.ts), all inside the negative int32s.
    const id = this.nextRingId - size < -0x8000_0000 ? -1 : this.nextRingId;
    if (!this.rings.submit(slot, id, false)) return undefined;
    this.nextRingId = id - size === -0x8000_0000 ? -1 : id - size - 1;
    this.ringPending++;
    this.hand(undefined);
    return new Promise<Completion[]>((resolve, reject) => {
      this.pending.set(id, { resolve: (completion) => resolve(memberCompletions(completion, size)), reject });
    });
  }

  /** A group's members as calls of their own; the group is bound once all of them are. */
  private submitMembers(calls: readonly Call[]): Promise<Completion[]> {
    const group = new PendingGroup(calls.length);
    // A refusal midway leaves the calls posted before it pending (they settle into a group nobody awaits).
    for (let index = 0; index < calls.length; index++) {
      const call = calls[index] as Call;
      const id = this.postOrRelease(call, false);
      const released = call.released;
      const resolve = (completion: Completion) => group.done(index, completion);
      this.pending.set(id, released ? { resolve, reject: group.fail, released } : { resolve, reject: group.fail });
    }
    const binding = this.bindings.bindGroup(calls);
    if (binding !== undefined) this.burstGroups.push(binding);
    return new Promise<Completion[]>((resolve, reject) => group.settleWith(resolve, reject));
  }

  /**
   * Submits a call and blocks this thread until it settles. Throws what `submit` would reject
   * with. `released` never runs when this thread gives up waiting (the engine may still use the
   * buffer then).
   */
  submitSync(call: Call): Completion {
    const { request, released } = call;
    const id = this.postOrRelease(call, true);
    // This thread blocks now: everything submitted so far must reach the engine first.
    this.endBurst();
    let result: { ok: true; value: Completion } | { ok: false; error: Error } | undefined;
    this.pending.set(id, {
      resolve: (value) => {
        result = { ok: true, value };
      },
      reject: (error) => {
        result = { ok: false, error };
      },
      ...(released ? { released } : {}),
    });
    const deadline = performance.now() + this.syncTimeoutMs;
    while (result === undefined) {
      const seen = Atomics.load(this.signal, kSignalCompletions);
      this.takeRing();
      if (result !== undefined) break;
      this.dispatchAll(this.thread.takeSync(id));
      if (result !== undefined) break;
      const left = deadline - performance.now();
      if (left <= 0 || this.closed) {
        if (this.pending.take(id) !== undefined && id < 0) this.ringPending--;
        throw this.closed
          ? new ShutdownError(`${request.op} '${request.name}': the engine stopped`)
          : new TimeoutError(`${request.op} '${request.name}' did not complete within ${this.syncTimeoutMs} ms`);
      }
      waitForChange(this.signal, kSignalCompletions, seen, left);
    }
    if (!result.ok) throw result.error;
    return result.value;
  }

  async shutdown(): Promise<void> {
    if (this.closed) return;
    const closed = new Promise<void>((resolve) => {
      this.onClosed = resolve;
    });
    this.thread.keepAlive(true);
    this.endBurst();
    this.thread.post({ type: 'shutdown' } satisfies ToEngine);
    await closed;
    await this.thread.terminate();
  }

  private refuseIfClosed(request: Call['request']): void {
    if (this.closed) throw new ShutdownError(`${request.op} '${request.name}': ringreduce has been shut down`);
  }

  /** post(), and a submission refused there never reached the engine: its memory is released at once. */
  private postOrRelease(call: Call, sync: boolean): number {
    try {
      return this.post(call, sync);
    } catch (error) {
      call.released?.();
      throw error;
    }
  }

  /**
   * Hands a submission to the engine. The first call of a synchronous burst is posted at once
   * (so a caller that then blocks its thread still has its collective running); the further
   * calls of the burst (a training step submitting its gradients in a loop) are posted together
   * at its end, in a microtask: the engine sees them together and reports them in one ready
   * round, fused, instead of a few at a time as separate messages trickle in (each postMessage
   * costs 4-10 us). While the burst lasts, a shared flag tells the engine that the rest is
   * coming, so it reports the first call together with them (engine/ready/burst_gate.ts).
   */
  private post(call: Call, sync: boolean): number {
    const { request, buffer, output, fresh, set } = call;
    this.refuseIfClosed(request);
    const slot = this.bindings.slotOf(call);
    if (slot !== undefined) {
      const id = this.nextRingId;
      if (this.rings.submit(slot, id, sync)) {
        // Ids of ring calls cycle through the negative int32s: at most a ring's worth are in flight.
        this.nextRingId = id === -0x8000_0000 ? -1 : id - 1;
        this.ringPending++;
        this.hand(undefined);
        return id;
      }
    }
    const id = this.nextId++;
    const submission: Submission = { id, request, buffer };
    if (output) submission.output = output;
    if (fresh) submission.fresh = true;
    if (set) submission.set = set;
    if (sync) submission.sync = true;
    const binding = this.bindings.bind(call);
    if (binding) {
      submission.slot = binding.slot;
      if (binding.drop !== undefined) submission.drop = binding.drop;
    }
    this.hand(submission);
    return id;
  }

  /**
   * Hands the engine a submission (undefined: one written to the ring): the first of a burst at
   * once, the rest when the burst ends (see post).
   */
  private hand(submission: Submission | undefined): void {
    if (this.inBurst) {
      if (this.burstCalls++ === 1) Atomics.store(this.signal, kSignalBurst, 1);
      if (submission) this.burst.push(submission);
    } else {
      this.inBurst = true;
      // After a burst of several calls (a training step) the next burst is likely one too: the
      // flag goes up before the post, so the engine waits even if it takes this call before
      // this thread makes the next. After a lone call (a latency loop) it goes up only at the
      // second call, so a lone call never makes the engine wait for this thread's microtask.
      if (this.lastBurstCalls > 1) Atomics.store(this.signal, kSignalBurst, 1);
      this.burstCalls = 1;
      const burst = ++this.bursts;
      afterThisTask(() => {
        if (burst === this.bursts) this.endBurst();
      });
      this.thread.post(submission ? ({ type: 'enqueue', submissions: [submission] } satisfies ToEngine) : kRingWritten);
    }
  }

  /** Posts the burst's queued submissions; the next call starts a new burst (and is posted at once). */
  private endBurst(): void {
    if (this.inBurst && this.burstCalls > 0) this.lastBurstCalls = this.burstCalls;
    // Calls the engine has not been told of: those after the first, or all of them if it was held.
    const more = this.inBurst && this.burstCalls > (this.heldFirst ? 0 : 1);
    this.inBurst = false;
    this.heldFirst = false;
    this.bursts++;
    if (this.burst.length > 0 || this.burstGroups.length > 0) {
      const submissions = this.burst;
      this.burst = [];
      const message: ToEngine = { type: 'enqueue', submissions };
      if (this.burstGroups.length > 0) {
        message.groups = this.burstGroups;
        this.burstGroups = [];
      }
      // The engine takes the ring's calls of the burst with this message too.
      this.thread.post(message);
    } else if (more) {
      this.thread.post(kRingWritten);
    }
    // Lowered after the post: an engine that sees the flag down finds the burst in its queue.
    if (Atomics.exchange(this.signal, kSignalBurst, 0) === 1) Atomics.notify(this.signal, kSignalBurst);
  }

  private dispatchAll(messages: readonly FromEngine[]): void {
    // What the engine put in the ring before it posted these comes first (an empty batch: only that).
    this.takeRing();
    for (const message of messages) this.dispatch(message);
  }

  /** Settles the ring calls whose completions the engine wrote (hand_off.ts). */
  private takeRing(): void {
    if (this.ringPending > 0) this.rings.takeCompletions(this.completeRingCall);
  }

  private readonly completeRingCall = (id: number): void => {
    const call = this.pending.take(id);
    if (!call) return;
    this.ringPending--;
    this.updateRefs();
    call.resolve({});
  };

  private dispatch(message: FromEngine): void {
    switch (message.type) {
      case 'ready':
        this.connectedWith = message.backend;
        this.onReady?.resolve({});
        this.onReady = undefined;
        return;
      case 'init-failed':
        this.onReady?.reject(fromErrorRecord(message.error));
        this.onReady = undefined;
        this.closed = true;
        void this.thread.terminate();
        return;
      case 'done':
      case 'failed': {
        const call = this.pending.take(message.id);
        if (!call) return;
        if (message.id < 0) this.ringPending--;
        this.updateRefs();
        call.released?.();
        if (message.type === 'failed') call.reject(fromErrorRecord(message.error));
        else call.resolve(message);
        return;
      }
      case 'closed':
        this.closed = true;
        this.rejectAll(new ShutdownError('ringreduce was shut down while this collective was pending'));
        this.onClosed?.();
        return;
    }
  }

  private die(error: RingReduceError): void {
    if (this.closed) return;
    this.closed = true;
    this.onReady?.reject(error);
    this.onReady = undefined;
    this.rejectAll(error);
    this.onClosed?.();
  }

  private rejectAll(error: Error): void {
    // The engine has stopped (it said so, or its thread is gone): it uses no buffer any more.
    for (const call of this.pending.takeAll()) {
      call.released?.();
      call.reject(error);
    }
    this.ringPending = 0;
    this.updateRefs();
  }

  private updateRefs(): void {
    const alive = this.pending.size > 0 || this.onReady !== undefined || this.onClosed !== undefined;
    if (alive === this.keptAlive) return;
    this.keptAlive = alive;
    this.thread.keepAlive(alive);
  }
}
