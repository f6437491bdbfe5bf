/**
 * The response cache (Horovod's idea): a training loop submits the same tensors with the same
 * parameters every step, so once a tensor has run, every rank knows it by the same small id and
 * the ranks agree on it among themselves with a bit-vector of ready ids (ready_rounds.ts),
 * without rank 0; rank 0's own responses travel as ids too when they can.
 *
 * How it stays identical on every rank: ids are handed out in the order in which rank 0's
 * execute responses are handled, which is the same on every rank, and an id is never reused:
 * when the cache is full, new names are simply not cached. A request whose parameters differ
 * from its cached ones goes to rank 0 in full; rank 0 then evicts the id on every rank at one
 * agreed place (engine.ts), and the name may be learned again under a new id.
 *
 * Not cached: operations whose spec says so (allgather: its response carries every rank's first
 * dimension, which may change from step to step) and unnamed calls (their names never repeat).
 *
 * Grouped calls (groups.ts): a named group that ran whole is cached as one id, which each of its
 * members finds (learnGroup); its members have no id of their own, so a member never runs without
 * its group. request(id) is a single tensor's; group(id) a group's members, in the order they ran.
 */
import { isUnnamed, isUnnamedLabel } from '../../core/collective_ops.js';
import { specOf } from '../ops/registry.js';
import type { ExecuteResponse, Request, Response } from '../wire/messages.js';

/** A grouped call cached as one id: its name and its members' requests, in the order they run. */
export interface CachedGroup {
  readonly name: string;
  readonly members: readonly Request[];
}

export class ResponseCache {
  /** Every cached name: a tensor's, or a group member's (its group's id). */
  private readonly byName = new Map<string, number>();
  /** Undefined once evicted, and for a group's id (see groups). */
  private readonly byId: (Request | undefined)[] = [];
  /** The cached groups by id, and their members' requests by name. */
  private readonly groups = new Map<number, CachedGroup>();
  private readonly members = new Map<string, Request>();
  /** Requests and responses sent as ids (for tests and diagnostics). */
  readonly hits = { requests: 0, responses: 0 };

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.byId.length;
  }

  /**
   * The id of `request` when it is cached with exactly these parameters; a group member's is its
   * group's (the group is ready once every member is: set_engine.ts).
   */
  idOf(request: Request): number | undefined {
    const id = this.byName.get(request.name);
    if (id === undefined) return undefined;
    const cached = this.byId[id] ?? this.members.get(request.name);
    // A call the caller repeats through the hand-off ring brings the very request that was learned.
    if (cached === undefined || (cached !== request && !sameFields(cached, request, kRequestExceptions))) return undefined;
    this.hits.requests++;
    return id;
  }

  /** Whether `request` is cached with exactly these parameters (without counting a hit). */
  holds(request: Request): boolean {
    const id = this.byName.get(request.name);
    const cached = id === undefined ? undefined : (this.byId[id] ?? this.members.get(request.name));
    return cached !== undefined && sameFields(cached, request, kRequestExceptions);
  }

  /** The group cached under `id`, or undefined (a tensor's id, or an unknown or evicted one). */
  group(id: number): CachedGroup | undefined {
    return this.groups.get(id);
  }

  /** The id under which `name` is cached, whatever its parameters. */
  idOfName(name: string): number | undefined {
    return this.byName.get(name);
  }

  /** The request cached under `id`, or undefined for an id this rank never assigned or evicted, or a group's (see group). */
  request(id: number): Request | undefined {
    return this.byId[id];
  }

  /** Takes `id` out of the cache for good; its names may be learned again under a new id. */
  evict(id: number): void {
    const group = this.groups.get(id);
    if (group) {
      this.groups.delete(id);
      for (const member of group.members) {
        this.byName.delete(member.name);
        this.members.delete(member.name);
      }
      return;
    }
    const request = this.byId[id];
    if (!request) return;
    this.byId[id] = undefined;
    this.byName.delete(request.name);
  }

  /** Remembers the requests of an execute response; called in response order on every rank. */
  learn(requests: readonly (Request | undefined)[]): void {
    for (const request of requests) {
      // A grouped request runs only with its group: the group is learned as one (learnGroup).
      if (!request || !specOf(request).cacheable || request.group || isUnnamed(request.name) || this.byName.has(request.name))
        continue;
      if (this.byId.length >= this.capacity) return;
      this.byName.set(request.name, this.byId.length);
      this.byId.push(request);
    }
  }

  /**
   * Remembers a grouped call that ran whole in one of rank 0's decisions as one id: `members` is
   * every member's request, in the order they ran; called in decision order on every rank. Not
   * when a member's op is not cacheable, the group is unnamed (its name never repeats) or a
   * member's name is cached already.
   */
  learnGroup(members: readonly Request[]): void {
    const group = members[0]?.group;
    if (group === undefined || members.length !== group.size || isUnnamedLabel(group.name)) return;
    for (const member of members) if (!specOf(member).cacheable || this.byName.has(member.name)) return;
    if (this.byId.length >= this.capacity) return;
    const id = this.byId.length;
    this.byId.push(undefined);
    this.groups.set(id, { name: group.name, members });
    for (const member of members) {
      this.byName.set(member.name, id);
      this.members.set(member.name, member);
    }
  }

  /** The ids of `response`'s names when the cache alone can rebuild it on the receiving side. */
  idsFor(response: Response): number[] | undefined {
    // Joined ranks stand in for the collective: only the full response says which.
    if (response.kind !== 'execute' || !specOf(response.request).cacheable || response.joined) return undefined;
    const ids: number[] = [];
    for (const name of response.names) {
      const id = this.byName.get(name);
      const cached = id === undefined ? undefined : this.byId[id];
      if (cached === undefined || !sameFields(cached, response.request, kParameterExceptions)) return undefined;
      ids.push(id as number);
    }
    this.hits.responses++;
    return ids;
  }

  /** The execute response rebuilt from ids (undefined when an id is unknown). */
  expand(ids: readonly number[]): ExecuteResponse | undefined {
    const requests = ids.map((id) => this.byId[id]);
    const first = requests[0];
    if (first === undefined || requests.some((r) => r === undefined)) return undefined;
    const names = requests.map((r) => (r as Request).name);
    return { kind: 'execute', names, request: first, counts: [] };
  }
}

const kNoExceptions: ReadonlySet<string> = new Set();
/** A request's identity in the cache: everything but its name. */
const kRequestExceptions = new Set(['name']);
/** What a response fixes for every name it runs: everything but the name and this rank's shape. */
const kParameterExceptions = new Set(['name', 'shape']);

/** Whether two requests (plain data: numbers, strings, arrays of numbers) agree on every field not in `except`. */
function sameFields(a: Request, b: Request, except: ReadonlySet<string>): boolean {
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  // for-in over plain objects allocates nothing: this runs on every cached call.
  for (const key in x) if (!except.has(key) && !sameValue(x[key], y[key])) return false;
  for (const key in y) if (!(key in x) && !except.has(key) && y[key] !== undefined) return false;
  return true;
}

function sameValue(u: unknown, v: unknown): boolean {
  if (u === v) return true;
  // A grouped request's group: { name, size, index }.
  if (typeof u === 'object' && u !== null && !Array.isArray(u) && typeof v === 'object' && v !== null && !Array.isArray(v)) {
    return sameFields(u as Request, v as Request, kNoExceptions);
  }
  if (!Array.isArray(u) || !Array.isArray(v)) return false;
  if (u.length !== v.length) return false;
  for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) return false;
  return true;
}
