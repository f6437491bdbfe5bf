/**
 * The life of one rank's calls between the facade (runtime.ts) and the engine: the process set a
 * call runs in (option 'processSet'), its preparation at call time (api/ops/), its name in flight,
 * the pooled memory it gives back once the engine is done with it, and its submission, awaited
 * (`run`), blocked on (`runSync`), or as one of a group (`runGroup`).
 */
import { platform } from '#platform';
import { createHalfConverter, type HalfConverter } from '../algorithms/half_convert.js';
import { BufferPool } from '../core/buffer_pool.js';
import { type CollectiveOp, unnamedName } from '../core/collective_ops.js';
import { allocShared } from '../core/dtypes.js';
import { InvalidArgumentError, RingReduceError, ShutdownError } from '../core/errors.js';
import { SharedMemoryReclaimer } from '../core/shared_memory_reclaimer.js';
import type { TypedArray } from '../core/types.js';
import type { Request } from '../engine/wire/messages.js';
import type { CallContext, Prepared } from './call.js';
import type { Completion, EngineLink } from './engine_client.js';
import { parseTimeout } from './ops/point_to_point.js';
import { type ProcessSet, parseProcessSet } from './process_set.js';
import { type Remembered, type RepeatSettlement, Repeats } from './repeats.js';
import { type ParsedTensor, parseName } from './tensor_args.js';

/**
 * Allgather input copies kept for reuse, at most (in free buffers): enough for the input of a
 * 512 MiB allgather on 2 ranks. What is kept stays resident, like the caller's own tensors.
 */
const kStagingRetainBytes = 256 * 1024 * 1024;

/** An op's preparation at call time (api/ops/): the checked arguments become a submission. */
export type Prepare<A> = (context: CallContext, argument: A, options: unknown) => Prepared;

/** The collective each grouped call is a group of. */
const kGroupedOps = {
  groupedAllreduce: 'allreduce',
  groupedAllgather: 'allgather',
  groupedReducescatter: 'reducescatter',
  groupedBroadcast: 'broadcast',
} as const;
export type GroupedOp = keyof typeof kGroupedOps;

/** What the calls need of their rank: its place in the job and its process sets. */
export interface CallOwner {
  /** The runtime whose process sets a call may name. */
  readonly runtime: object;
  readonly rank: number;
  readonly size: number;
}

/**
 * A grouped call's options: `outs` (where each member's result goes, as the collective's option
 * 'out', in member order; undefined entries get fresh memory) taken out of the options every
 * member shares. A single 'out' is refused: every member would write its result there.
 */
function splitOuts(op: GroupedOp, options: unknown, count: number): { outs?: readonly unknown[]; shared: object } {
  if (typeof options !== 'object' || options === null) return { shared: options as object };
  const { outs, ...shared } = options as { outs?: unknown; out?: unknown };
  if ('out' in shared) {
    throw new InvalidArgumentError(`${op} takes option 'outs' (one typed array per tensor, in order), not 'out'`);
  }
  if (outs === undefined) return { shared };
  if (!Array.isArray(outs) || outs.length !== count) {
    const got = Array.isArray(outs) ? `an array of ${outs.length}` : String(outs);
    throw new InvalidArgumentError(
      `option 'outs' of ${op} must be an array of ${count} typed arrays (or undefined), one for each tensor in order, got ${got}`,
    );
  }
  return { outs, shared };
}

/** A member's preparation; a refusal of the 'out' it got from 'outs' names that entry. */
function prepareMember(
  prepare: Prepare<unknown>,
  context: CallContext,
  tensor: unknown,
  options: object,
  outIndex: number | undefined,
): Prepared {
  try {
    return prepare(context, tensor, options);
  } catch (error) {
    if (outIndex === undefined || !(error instanceof InvalidArgumentError) || !error.message.includes("option 'out'"))
      throw error;
    throw new InvalidArgumentError(error.message.replaceAll("option 'out'", `option 'outs[${outIndex}]'`));
  }
}

export class Calls {
  /** How many unnamed calls of each op, per process set, this rank has made: ranks match them by this order. */
  private readonly unnamedCounters = new Map<string, number>();
  /** The names in flight, per process set (0: the world): names are scoped per set. */
  private readonly inFlight = new Map<number, Set<string>>();
  /** Process sets (0: the world) in which this rank has a join pending: it makes no other call there. */
  private readonly joining = new Set<number>();
  /**
   * Fresh outputs are SharedArrayBuffers, which V8 is slow to free: see shared_memory_reclaimer.ts.
   * Adaptive: a loop of large fresh outputs gets its old ones freed, and reused by malloc, soon.
   */
  private readonly reclaimer = new SharedMemoryReclaimer({ adaptive: true, collect: platform.collector() });
  /**
   * Memory for allgather's input copy (the engine needs it shared, and the output's layout is
   * only known after negotiation), reused: fresh memory costs its page faults at first touch,
   * which made a 16 MiB allgather on 2 ranks take 42 ms instead of 8 here.
   */
  private readonly staging = new BufferPool<SharedArrayBuffer>(kStagingRetainBytes, (bytes) => new SharedArrayBuffer(bytes));
  /** The last call of each name that may repeat, with its checked preparation. */
  private readonly repeats = new Repeats<Prepared>();
  /** The last grouped call of each group name that may repeat, with its members' checked preparations. */
  private readonly groupRepeats = new Repeats<readonly Prepared[]>();
  /** fp16 compression's conversions: a WebAssembly instance, made by the first compressed call. */
  private halfConverter: HalfConverter | undefined;
  private shutDown = false;
  /** What the ops' preparations need from this rank, for the world's collectives. */
  private world: CallContext;
  private readonly setContexts = new Map<number, CallContext>();

  constructor(
    private engine: EngineLink,
    private owner: CallOwner,
  ) {
    this.world = this.contextFor(undefined);
  }

  /** The world's context, for the world's own collectives (adding and removing process sets). */
  get worldContext(): CallContext {
    return this.world;
  }

  /** An elastic job's next generation: another engine, another rank; names and sets start over. */
  restart(engine: EngineLink, owner: CallOwner): void {
    this.engine = engine;
    this.owner = owner;
    this.world = this.contextFor(undefined);
    this.setContexts.clear();
    this.repeats.clear();
    this.groupRepeats.clear();
    this.unnamedCounters.clear();
    this.inFlight.clear();
    this.joining.clear();
  }

  /** Later calls are refused with ShutdownError. */
  close(): void {
    this.shutDown = true;
  }

  /** Process set `id` was removed: its context goes. */
  forgetSet(id: number): void {
    this.setContexts.delete(id);
    this.repeats.forgetSet(id);
    this.groupRepeats.forgetSet(id);
  }

  /**
   * Prepares the call in the set of option 'processSet' and runs it; settles with the caller's
   * result. A repeat of the last call of its name reuses that call's preparation (repeats.ts).
   */
  run<A>(prepare: Prepare<A>, argument: A, options: unknown): Promise<unknown> {
    // While a join is pending the full checks run: they refuse the call.
    const repeat = this.joining.size === 0 ? this.repeats.find(prepare, argument, options) : undefined;
    if (repeat !== undefined) return this.submitRepeat(repeat);
    let prepared: Prepared;
    try {
      prepared = this.scoped(prepare, argument, options, false);
    } catch (error) {
      return Promise.reject(error);
    }
    this.repeats.remember(prepare, argument, options, prepared);
    return this.submit(prepared);
  }

  /**
   * `prepare`s the call of ...Sync method `method` and blocks this thread until it settles;
   * refused first, before the call takes a name, where this thread may not block.
   */
  runSync<A>(method: string, prepare: Prepare<A>, argument: A, options: unknown): unknown {
    if (!platform.mayBlock()) {
      throw new RingReduceError(
        `${method} blocks its thread (Atomics.wait), which a browser does not allow on a page's main thread: await ${method.slice(0, -4)}() instead, or run the program in a worker (ringrun's page does)`,
      );
    }
    if (this.engine.engineOnCallerThread) {
      throw new RingReduceError(
        `${method} blocks its thread, on which the engine runs with RINGREDUCE_ENGINE_THREAD=0 (init option engineThread: false): await ${method.slice(0, -4)}() instead, or leave the engine its own thread`,
      );
    }
    const prepared = this.scoped(prepare, argument, options, false);
    const names = this.claim(prepared);
    try {
      return prepared.finish(this.engine.submitSync(prepared));
    } finally {
      names.delete(prepared.request.name);
      prepared.releaseHeld?.();
    }
  }

  /**
   * Runs a call prepared in the world's context (the collectives of process sets themselves).
   * Written with then() rather than as an async function: it runs on every call, and one
   * promise reaction allocates less than an async function's frame and its await.
   */
  submit(prepared: Prepared): Promise<unknown> {
    let names: Set<string>;
    let completion: Promise<Completion>;
    try {
      names = this.claim(prepared);
    } catch (error) {
      return Promise.reject(error);
    }
    const over = () => {
      names.delete(prepared.request.name);
      prepared.releaseHeld?.();
    };
    try {
      completion = this.engine.submit(prepared);
    } catch (error) {
      over();
      return Promise.reject(error);
    }
    return completion.then(
      (done) => {
        try {
          return prepared.finish(done);
        } finally {
          over();
        }
      },
      (error: unknown) => {
        over();
        throw error;
      },
    );
  }

  /**
   * submit() for a repeat: its per-call work redone, and settled by handlers made at its first
   * repeat (a repeated call has no staging memory: settling takes its name out of flight).
   */
  private submitRepeat(repeat: Remembered<Prepared>): Promise<unknown> {
    const { prepared } = repeat;
    let completion: Promise<Completion>;
    try {
      const names = this.claim(prepared);
      repeat.settlement ??= settlementOf(prepared, names);
      (prepared.again as () => void)();
      try {
        completion = this.engine.submit(prepared);
      } catch (error) {
        names.delete(prepared.request.name);
        throw error;
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return completion.then(repeat.settlement.done, repeat.settlement.failed);
  }

  /** A join: while it is pending, this rank makes no other call in its set. */
  async join(prepare: Prepare<undefined>, options: unknown): Promise<number> {
    const prepared = this.scoped(prepare, undefined, options, true);
    const set = prepared.set ?? 0;
    this.joining.add(set);
    try {
      return (await this.submit(prepared)) as number;
    } finally {
      this.joining.delete(set);
    }
  }

  /**
   * Prepares every member of a group (nothing is submitted if one is refused), marks them as one
   * group, and submits them in one burst: rank 0 releases them together (engine/negotiation/groups.ts).
   */
  async runGroup(op: GroupedOp, tensors: unknown, options: unknown, prepare: Prepare<unknown>): Promise<unknown[]> {
    const repeat = this.joining.size === 0 ? this.groupRepeats.find(prepare, tensors, options) : undefined;
    if (repeat !== undefined) return this.submitGroup(repeat.prepared, true);
    if (!Array.isArray(tensors) || tensors.length === 0) {
      throw new InvalidArgumentError(`${op} needs a non-empty array of tensors, got ${String(tensors)}`);
    }
    const given = typeof options === 'object' && options !== null ? (options as { name?: unknown }).name : undefined;
    const { outs, shared } = splitOuts(op, options, tensors.length);
    const calls: Prepared[] = [];
    const prepareAll: Prepare<undefined> = (c) => {
      const group = c.nameFor(kGroupedOps[op], parseName(given), op);
      for (const [index, tensor] of tensors.entries()) {
        const out = outs?.[index];
        const member = { ...shared, name: `${group}/${index}`, ...(out === undefined ? {} : { out }) };
        const call = prepareMember(prepare, c, tensor, member, out === undefined ? undefined : index);
        (call.request as Request).group = { name: group, size: tensors.length, index };
        calls.push(call);
      }
      return calls[0] as Prepared;
    };
    const first = this.scoped(prepareAll, undefined, options, false);
    const { timeoutMs } = first.request as Request;
    for (const call of calls) {
      call.set = first.set;
      if (timeoutMs !== undefined) (call.request as Request).timeoutMs = timeoutMs;
    }
    this.groupRepeats.remember(prepare, tensors, options, calls);
    return this.submitGroup(calls, false);
  }

  /**
   * Claims every member's name (none is submitted if one is refused), submits them in one burst
   * and settles with their results in order; a repeat (`again`) first redoes each member's input copy.
   */
  private async submitGroup(calls: readonly Prepared[], again: boolean): Promise<unknown[]> {
    let claimed = 0;
    try {
      for (const call of calls) {
        this.claim(call);
        claimed++;
      }
    } catch (error) {
      // Nothing was submitted: the claimed names and every member's memory go back now.
      for (const call of calls.slice(0, claimed)) this.namesInFlight(call.set).delete(call.request.name);
      for (const [i, call] of calls.entries()) {
        if (i < claimed) {
          call.released?.();
          call.releaseHeld?.();
        } else if (i > claimed) {
          if (call.staging) this.staging.release(call.staging);
          if (call.heldStaging) this.staging.release(call.heldStaging);
        }
      }
      throw error;
    }
    if (again) for (const call of calls) (call.again as () => void)();
    try {
      const { engine } = this;
      const completions = await (engine.submitAll
        ? engine.submitAll(calls)
        : Promise.all(calls.map((call) => engine.submit(call))));
      return completions.map((completion, i) => (calls[i] as Prepared).finish(completion));
    } finally {
      for (const call of calls) {
        this.namesInFlight(call.set).delete(call.request.name);
        call.releaseHeld?.();
      }
    }
  }

  /** The context of a call with option 'processSet' `value` (the world's when undefined), checked as for any call. */
  contextOf(value: unknown): CallContext {
    const set = parseProcessSet(value, this.owner.runtime, this.owner.rank);
    return set ? this.contextOfSet(set) : this.world;
  }

  /** The call prepared in the context of option 'processSet' (the world's when unset). */
  private scoped<A>(prepare: Prepare<A>, argument: A, options: unknown, joinCall: boolean): Prepared {
    const given =
      typeof options === 'object' && options !== null ? (options as { processSet?: unknown; timeoutMs?: unknown }) : {};
    const value = given.processSet;
    const set = value === undefined ? undefined : parseProcessSet(value, this.owner.runtime, this.owner.rank);
    const timeoutMs = parseTimeout(given.timeoutMs);
    // Refused before the call takes an unnamed name: ranks match unnamed calls by their count.
    if (!joinCall && this.joining.size > 0 && this.joining.has(set?.id ?? 0)) {
      const where = set ? `process set ${set.id}` : 'the job';
      throw new InvalidArgumentError(
        `rank ${this.owner.rank} has joined ${where}: wait for join() to resolve before its next collective`,
      );
    }
    const prepared = prepare(set ? this.contextOfSet(set) : this.world, argument, options);
    if (set) prepared.set = set.id;
    // A collective's deadline is rank 0's to apply (engine/negotiation/coordinator.ts); sends and recvs keep theirs.
    if (timeoutMs !== undefined && !isPeer(prepared.request)) (prepared.request as Request).timeoutMs = timeoutMs;
    return prepared;
  }

  private contextOfSet(set: ProcessSet): CallContext {
    let context = this.setContexts.get(set.id);
    if (!context) {
      context = this.contextFor(set);
      this.setContexts.set(set.id, context);
    }
    return context;
  }

  /** Ranks and names inside `set` (the world when undefined); memory is shared by all. */
  private contextFor(set: ProcessSet | undefined): CallContext {
    const scope = set ? `${set.id}/` : '';
    const { rank, size } = this.owner;
    return {
      rank: set ? set.rank() : rank,
      size: set ? set.size() : size,
      ...(set && { set: { id: set.id, ranks: set.ranks } }),
      nameFor: (op, name, label) => {
        if (name !== undefined) return name;
        const key = `${scope}${op}`;
        const n = this.unnamedCounters.get(key) ?? 0;
        this.unnamedCounters.set(key, n + 1);
        return label === undefined ? unnamedName(op as CollectiveOp, n) : `${label} #${n}`;
      },
      fresh: (t: ParsedTensor, length = t.data.length): TypedArray => {
        const array = allocShared(t.dtype, length);
        this.reclaimer.release(array.byteLength);
        return array;
      },
      staging: this.staging,
      halves: () => {
        this.halfConverter ??= createHalfConverter();
        return this.halfConverter;
      },
    };
  }

  /**
   * Marks the name in flight in its set (names are scoped per set), and has the call's staging
   * memory go back to the pool once the engine is done with it (`released`). A call refused here
   * gives it back at once. Held staging goes back after `finish` (`releaseHeld`), and only if the
   * engine is done with it: a call this thread gave up waiting for keeps it out of reuse. Returns
   * the names in flight in the call's set, which the caller takes the name out of once it settled.
   */
  private claim(prepared: Prepared): Set<string> {
    const { staging, heldStaging } = prepared;
    let engineDone = false;
    if (staging || heldStaging) {
      prepared.released = () => {
        engineDone = true;
        if (staging) this.staging.release(staging);
      };
    }
    if (heldStaging) {
      prepared.releaseHeld = () => {
        if (!engineDone) return;
        engineDone = false;
        this.staging.release(heldStaging);
      };
    }
    const { op, name } = prepared.request;
    const names = this.namesInFlight(prepared.set);
    try {
      if (this.shutDown) throw new ShutdownError(`${op} '${name}': ringreduce has been shut down`);
      if (names.has(name)) {
        const where = prepared.set ? ` in process set ${prepared.set}` : '';
        throw new InvalidArgumentError(`a collective named '${name}' is already in flight${where} on rank ${this.owner.rank}`);
      }
    } catch (error) {
      prepared.released?.();
      prepared.releaseHeld?.();
      throw error;
    }
    names.add(name);
    return names;
  }

  private namesInFlight(set = 0): Set<string> {
    let names = this.inFlight.get(set);
    if (!names) {
      names = new Set();
      this.inFlight.set(set, names);
    }
    return names;
  }
}

/** How the repeats of `prepared` settle: its name leaves `names` (the names in flight in its set), then the result. */
function settlementOf(prepared: Prepared, names: Set<string>): RepeatSettlement {
  const { name } = prepared.request;
  return {
    done: (completion) => {
      names.delete(name);
      return prepared.finish(completion);
    },
    failed: (error) => {
      names.delete(name);
      throw error;
    },
  };
}

function isPeer(request: Prepared['request']): boolean {
  return request.op === 'send' || request.op === 'recv' || request.op === 'batchSendRecv';
}
