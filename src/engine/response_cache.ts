/**
 * The response cache (Horovod's idea, simplified to our star negotiation): a training loop
 * submits the same tensors with the same parameters every step, so after the first step a rank
 * reports each of them as a 4-byte cache id instead of its name, dtype and shape, and rank 0
 * answers with ids too. Rank 0 turns the ids back into the very requests it validated before.
 *
 * How it stays identical on every rank: ids are handed out in the order in which execute
 * responses are handled, which is the same on every rank (one ordered response stream), and an
 * id is never reused or changed: when the cache is full, new names are simply not cached, and
 * a request whose parameters differ from its cached ones travels in full. So an id a rank sends
 * was assigned by a response rank 0 handled before it, and rank 0 knows it.
 *
 * Allgather is not cached: its agreed response carries every rank's first dimension, which may
 * change from step to step.
 */
import type { ExecuteResponse, Request, Response } from './messages.js';

export class ResponseCache {
  private readonly byName = new Map<string, number>();
  private readonly byId: Request[] = [];
  /** Requests and responses sent as ids (for tests and diagnostics). */
  readonly hits = { requests: 0, responses: 0 };

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.byId.length;
  }

  /** The id of `request` when it is cached with exactly these parameters. */
  idOf(request: Request): number | undefined {
    const id = this.byName.get(request.name);
    if (id === undefined || !sameRequest(this.byId[id] as Request, request)) return undefined;
    this.hits.requests++;
    return id;
  }

  /** The request cached under `id`, or undefined for an id this rank never assigned. */
  request(id: number): Request | undefined {
    return this.byId[id];
  }

  /** Remembers the requests of an execute response; called in response order on every rank. */
  learn(requests: readonly (Request | undefined)[]): void {
    for (const request of requests) {
      if (!request || request.op === 'allgather' || this.byName.has(request.name)) continue;
      if (this.byId.length >= this.capacity) return;
      this.byName.set(request.name, this.byId.length);
      this.byId.push(request);
    }
  }

  /** The ids of `response`'s names when the cache alone can rebuild it on the receiving side. */
  idsFor(response: Response): number[] | undefined {
    if (response.kind !== 'execute' || response.op === 'allgather') return undefined;
    const ids: number[] = [];
    for (const name of response.names) {
      const id = this.byName.get(name);
      const cached = id === undefined ? undefined : this.byId[id];
      if (cached === undefined || !sameParameters(cached, response)) return undefined;
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
    return {
      kind: 'execute',
      names,
      op: first.op,
      dtype: first.dtype,
      reduceOp: first.reduceOp,
      root: first.root,
      firstDims: [],
    };
  }
}

function sameParameters(request: Request, response: ExecuteResponse): boolean {
  return (
    request.op === response.op &&
    request.dtype === response.dtype &&
    request.reduceOp === response.reduceOp &&
    request.root === response.root
  );
}

function sameRequest(a: Request, b: Request): boolean {
  if (a.op !== b.op || a.dtype !== b.dtype || a.reduceOp !== b.reduceOp || a.root !== b.root) return false;
  if (a.shape.length !== b.shape.length) return false;
  for (let i = 0; i < a.shape.length; i++) if (a.shape[i] !== b.shape[i]) return false;
  return true;
}
