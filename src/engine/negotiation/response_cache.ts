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
 */
import { isUnnamed } from '../../core/collective_ops.js';
import { specOf } from '../ops/registry.js';
import type { ExecuteResponse, Request, Response } from '../wire/messages.js';

export class ResponseCache {
  private readonly byName = new Map<string, number>();
  /** Undefined once evicted. */
  private readonly byId: (Request | undefined)[] = [];
  /** Requests and responses sent as ids (for tests and diagnostics). */
  readonly hits = { requests: 0, responses: 0 };

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.byId.length;
  }

  /** The id of `request` when it is cached with exactly these parameters. */
  idOf(request: Request): number | undefined {
    const id = this.byName.get(request.name);
    if (id === undefined) return undefined;
    const cached = this.byId[id];
    // A call the caller repeats through the hand-off ring brings the very request that was learned.
    if (cached !== request && !sameFields(cached as Request, request, kRequestExceptions)) return undefined;
    this.hits.requests++;
    return id;
  }

  /** Whether `request` is cached with exactly these parameters (without counting a hit). */
  holds(request: Request): boolean {
    const id = this.byName.get(request.name);
    return id !== undefined && sameFields(this.byId[id] as Request, request, kRequestExceptions);
  }

  /** The id under which `name` is cached, whatever its parameters. */
  idOfName(name: string): number | undefined {
    return this.byName.get(name);
  }

  /** The request cached under `id`, or undefined for an id this rank never assigned or evicted. */
  request(id: number): Request | undefined {
    return this.byId[id];
  }

  /** Takes `id` out of the cache for good; its name may be learned again under a new id. */
  evict(id: number): void {
    const request = this.byId[id];
    if (!request) return;
    this.byId[id] = undefined;
    this.byName.delete(request.name);
  }

  /** Remembers the requests of an execute response; called in response order on every rank. */
  learn(requests: readonly (Request | undefined)[]): void {
    for (const request of requests) {
      // A grouped request runs only with its group, which rank 0 holds together (groups.ts).
      if (!request || !specOf(request).cacheable || request.group || isUnnamed(request.name) || this.byName.has(request.name))
        continue;
      if (this.byId.length >= this.capacity) return;
      this.byName.set(request.name, this.byId.length);
      this.byId.push(request);
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
  if (!Array.isArray(u) || !Array.isArray(v)) return u === v;
  if (u.length !== v.length) return false;
  for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) return false;
  return true;
}
