/**
 * The coordinator, run by rank 0's engine: it counts, per tensor name, which ranks have
 * reported the name ready; when all have, it checks that they agree (validation.ts) and
 * appends the response to the list it sends every rank. Because every rank receives the same
 * responses in the same order over ordered links, every rank executes collectives in one
 * agreed order, whatever order the ranks submitted them in.
 *
 * Stalls: the StallInspector (observability/stall_inspector.ts) watches the waiting names. After
 * `stallWarningMs` it logs which ranks have not submitted which names; after `stallTimeoutMs`,
 * or the smallest option 'timeoutMs' among the requests of the name (a caller's deadline),
 * the coordinator fails the name on every rank that submitted it with a TimeoutError that names
 * the ranks that did and did not submit it. An idle job has no timer at all. Cached collectives never reach
 * the coordinator (ranks agree on them in ready rounds), so rank 0's engine tells it, after
 * each round, which cached names some ranks have ready and others not (`watchCached`): those
 * stall and time out exactly like the others.
 */
import type { Logger } from '../../core/logger.js';
import { type StalledName, StallInspector, type WaitingName } from '../../observability/stall_inspector.js';
import type { ErrorResponse, Request, Response } from '../wire/messages.js';
import { GroupGate } from './groups.js';
import { JoinState } from './join_state.js';
import { negotiate } from './validation.js';

interface Pending {
  requests: (Request | undefined)[];
  count: number;
  since: number;
  /** The smallest option 'timeoutMs' of the requests so far; unset: the stall timeout applies. */
  timeoutMs?: number;
}

/** A joined rank's slot, for the stall inspector: it is not what the set waits for. */
const kStandIn = 'joined';

export interface CoordinatorOptions {
  size: number;
  stallTimeoutMs: number;
  /** When to log which ranks hold a name up; 0 or unset: no warning. */
  stallWarningMs?: number;
  /** Sends the responses to every rank, rank 0 included, in this order. */
  publish: (responses: Response[]) => void;
  /** Tells every rank that all ranks asked to shut down. */
  publishShutdown: () => void;
  logger: Logger;
  now?: () => number;
}

export class Coordinator {
  // A Map iterates in insertion order, so the first entry is always the oldest waiting name.
  private readonly pending = new Map<string, Pending>();
  /** Cached names some ranks have ready, as of the last ready round (see watchCached). */
  private cached = new Map<string, Pending>();
  private readonly shutdownRanks = new Set<number>();
  private readonly joins: JoinState;
  /** Grouped collectives complete on every rank, held until their whole group is. */
  private readonly groups = new GroupGate();
  /** The group of each waiting grouped name (a stall of one member fails its group). */
  private readonly groupOf = new Map<string, NonNullable<Request['group']>>();
  private readonly stalls: StallInspector;
  private readonly now: () => number;

  constructor(private readonly options: CoordinatorOptions) {
    this.now = options.now ?? (() => performance.now());
    this.joins = new JoinState(options.size);
    this.stalls = new StallInspector({
      warningMs: options.stallWarningMs ?? 0,
      timeoutMs: options.stallTimeoutMs,
      logger: options.logger,
      now: this.now,
      waiting: () => this.waiting(),
      onTimeout: (stalled) => this.failStalled(stalled),
    });
  }

  /** One rank's report of newly ready requests (the end of the list is its DONE marker). */
  onRequests(rank: number, requests: readonly Request[]): void {
    const ready: Response[] = [];
    for (const request of requests) {
      if (request.op === 'join' && !this.joins.has(rank)) ready.push(...this.onJoin(rank));
      const response = this.add(rank, request);
      if (response) ready.push(...this.groups.admit(request, response));
    }
    if (ready.length > 0) this.options.publish(ready);
    if (this.shutdownRanks.size > 0) this.failMissedByShutDown(requests);
    this.stalls.update();
  }

  /** Names just submitted that a rank which has shut down will never submit: they fail at once. */
  private failMissedByShutDown(requests: readonly Request[]): void {
    const doomed: [string, Pending][] = [];
    for (const { name } of requests) {
      const entry = this.pending.get(name);
      if (entry && this.missingShutDown(entry) !== undefined) doomed.push([name, entry]);
    }
    if (doomed.length > 0) this.failShutDown(doomed);
  }

  /** The first rank that has shut down without submitting `entry` (a joined rank stands in). */
  private missingShutDown(entry: Pending): number | undefined {
    if (entry.requests.find((r) => r !== undefined)?.op === 'join') return undefined;
    for (const rank of this.shutdownRanks) if (entry.requests[rank] === undefined && !this.joins.has(rank)) return rank;
    return undefined;
  }

  private failShutDown(doomed: readonly [string, Pending][]): void {
    this.failNames(
      doomed.map(([name, entry]) => {
        const submitted = entry.requests.flatMap((r, rank) => (r === undefined ? [] : [rank]));
        const gone = this.missingShutDown(entry) as number;
        const message = `rank ${gone} has shut down (its program ended, or it called shutdown()): '${name}' cannot complete without it`;
        return { name, message, submitted, errorKind: 'ShutdownError' as const };
      }),
    );
  }

  /** Whether some rank of the set has joined (then every request comes here in full). */
  get joining(): boolean {
    return this.joins.active;
  }

  /**
   * `rank` joined: every rank learns it at this place in the agreed order, and the names every
   * other rank has submitted can run now, with the joined ranks standing in.
   */
  private onJoin(rank: number): Response[] {
    this.joins.add(rank);
    // No ready round closes in join mode: what the last one said waits is sent here in full now.
    this.cached.clear();
    const ready: Response[] = [{ kind: 'joined', names: [], ranks: this.joins.ranks }];
    for (const [name, entry] of this.pending) {
      const request = entry.requests.find((r) => r !== undefined) as Request;
      // The join itself completes only when every rank has submitted it (below, in add).
      if (request.op === 'join' || !this.joins.complete(entry.requests)) continue;
      this.pending.delete(name);
      this.groupOf.delete(name);
      ready.push(...this.groups.admit(request, this.negotiated(name, entry)));
    }
    return ready;
  }

  /** The response for a complete name; the join itself resolves to the last rank to join. */
  private negotiated(name: string, entry: Pending): Response {
    const response = negotiate(name, entry.requests, this.joins.standIns(entry.requests));
    if (response.kind === 'execute' && response.request.op === 'join') response.counts = [this.joins.finish()];
    return response;
  }

  /**
   * The cached names that, after the last ready round, some ranks have ready and others not,
   * with the ranks that have them. Replaces the previous list; a name keeps its first time.
   */
  watchCached(names: readonly { request: Request; ranks: readonly number[] }[]): void {
    // The steady state: nothing waited after the last round and nothing waits now.
    if (names.length === 0 && this.cached.size === 0) return;
    const next = new Map<string, Pending>();
    for (const { request, ranks } of names) {
      const requests: (Request | undefined)[] = new Array(this.options.size).fill(undefined);
      for (const rank of ranks) requests[rank] = request;
      const since = this.cached.get(request.name)?.since ?? this.now();
      // Rank 0 knows only its own cached request: the ranks agreed on it without sending theirs.
      const timeout = request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs };
      next.set(request.name, { requests, count: ranks.length, since, ...timeout });
    }
    this.cached = next;
    this.stalls.update();
  }

  onShutdown(rank: number): void {
    this.shutdownRanks.add(rank);
    if (this.shutdownRanks.size === this.options.size) {
      this.options.publishShutdown();
      return;
    }
    // What waits for this rank now never completes: it fails at once on the ranks that submitted it.
    const doomed: [string, Pending][] = [];
    for (const [name, entry] of this.pending) if (this.missingShutDown(entry) !== undefined) doomed.push([name, entry]);
    if (doomed.length > 0) this.failShutDown(doomed);
  }

  /** Names some rank has reported and not every rank has (for diagnostics). */
  waitingNames(): string[] {
    return [...this.pending.keys(), ...this.cached.keys()];
  }

  close(): void {
    this.stalls.close();
    this.groups.clear();
    this.pending.clear();
    this.cached.clear();
  }

  /** Every waiting name, oldest first within each kind; a joined rank counts as having submitted it. */
  private *waiting(): Iterable<[string, WaitingName]> {
    for (const [name, entry] of this.pending) {
      // A join waits as long as the others still have data: it is not a stall (a dead rank still fails it).
      if (entry.requests.find((r) => r !== undefined)?.op === 'join') continue;
      if (!this.joins.active) yield [name, entry];
      else
        yield [name, { ...entry, requests: entry.requests.map((r, rank) => r ?? (this.joins.has(rank) ? kStandIn : undefined)) }];
    }
    yield* this.cached.entries();
  }

  private add(rank: number, request: Request): Response | undefined {
    const { name } = request;
    let entry = this.pending.get(name);
    if (!entry) {
      entry = { requests: new Array(this.options.size).fill(undefined), count: 0, since: this.now() };
      this.pending.set(name, entry);
    }
    if (entry.requests[rank] !== undefined) {
      this.pending.delete(name);
      return {
        kind: 'error',
        names: [name],
        errorKind: 'InvalidArgumentError',
        message: `Rank ${rank} submitted tensor '${name}' twice before every rank had submitted it once.`,
      };
    }
    entry.requests[rank] = request;
    entry.count++;
    if (request.timeoutMs !== undefined) entry.timeoutMs = Math.min(entry.timeoutMs ?? request.timeoutMs, request.timeoutMs);
    if (request.group) this.groupOf.set(name, request.group);
    if (!this.joins.complete(entry.requests)) return undefined;
    this.pending.delete(name);
    this.groupOf.delete(name);
    return this.negotiated(name, entry);
  }

  private failStalled(stalled: readonly StalledName[]): void {
    this.failNames(stalled.map((s) => ({ ...s, errorKind: 'TimeoutError' as const })));
  }

  /** Fails each name on the ranks that submitted it (the others may hold a newer submission by then). */
  private failNames(names: readonly (StalledName & { errorKind: ErrorResponse['errorKind'] })[]): void {
    const responses: Response[] = [];
    for (const { name, message, submitted, errorKind } of names) {
      this.pending.delete(name);
      this.cached.delete(name);
      const failure: ErrorResponse = { kind: 'error', names: [name], errorKind, message, ranks: submitted };
      responses.push(failure);
      // The rest of its group: the members complete on every rank fail with it (those still
      // waiting stall on their own).
      const group = this.groupOf.get(name);
      this.groupOf.delete(name);
      if (group !== undefined) responses.push(...this.groups.fail(group, failure));
    }
    this.options.publish(responses);
  }
}
