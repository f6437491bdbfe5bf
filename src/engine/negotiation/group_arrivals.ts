/**
 * Which members of each cached group (response_cache.ts: a grouped call that ran whole is one id)
 * this rank has queued since its group last went ready. The members of one call arrive one by one,
 * usually in one burst but not necessarily in one report; the group's id joins the ready rounds
 * only once every member is here, as rank 0 would release it (groups.ts). Until then the members
 * wait in the queue, unreported; if the group stops being cached meanwhile (evicted, or a rank
 * joined), the members that arrived go to rank 0 in full.
 */
import type { Request } from '../wire/messages.js';

interface Arrived {
  /** The arrived members' requests by member index. */
  requests: (Request | undefined)[];
  count: number;
}

export class GroupArrivals {
  private readonly byId = new Map<number, Arrived>();

  /** Member `request` of the group cached under `id` is queued: true when it completes the group (which starts over). */
  arrive(id: number, request: Request): boolean {
    const group = request.group;
    if (group === undefined) return true;
    let arrived = this.byId.get(id);
    if (arrived === undefined) {
      arrived = { requests: new Array<Request | undefined>(group.size).fill(undefined), count: 0 };
      this.byId.set(id, arrived);
    }
    if (arrived.requests[group.index] === undefined) arrived.count++;
    arrived.requests[group.index] = request;
    if (arrived.count < group.size) return false;
    arrived.requests.fill(undefined);
    arrived.count = 0;
    return true;
  }

  /** The members of group `id` that arrived and are not ready yet (forgotten here). */
  take(id: number): Request[] {
    const arrived = this.byId.get(id);
    this.byId.delete(id);
    return arrived ? arrived.requests.filter((r): r is Request => r !== undefined) : [];
  }

  /** Every group's arrived members (all forgotten): a rank joined, everything goes to rank 0 in full. */
  takeAll(): Request[] {
    const all: Request[] = [];
    for (const id of [...this.byId.keys()]) all.push(...this.take(id));
    return all;
  }

  /** Forgets group `id`'s arrivals (its members failed). */
  forget(id: number): void {
    this.byId.delete(id);
  }

  clear(): void {
    this.byId.clear();
  }
}
