/**
 * Calls in flight by id: those the caller's thread waits on (api/engine_client.ts), those the
 * engine has not settled (engine/engine.ts). Not a Map: a Map that every burst of calls fills and
 * empties again allocates a new table at each growth and shrink, and in V8 those tables, with
 * every call and promise their entries reach, survived the young generation's collections until
 * the next full one: on a step of 100 calls the collections took more than ten times as long
 * (docs/performance.md, "Pending calls without a Map").
 *
 * An id lives in the slot of its low bits: ids in flight together are consecutive (message ids
 * count up, ring ids down), so they fall in different slots; an id whose slot is taken (more
 * calls in flight than slots) waits in a Map beside them.
 */

/** Slots (a power of two): calls in flight at once, at most, before the Map beside is used. */
const kSlots = 4096;

export class CallTable<T> {
  private readonly slots = new Array<T | undefined>(kSlots).fill(undefined);
  private readonly ids = new Int32Array(kSlots);
  private readonly overflow = new Map<number, T>();
  private inSlots = 0;

  get size(): number {
    return this.inSlots + this.overflow.size;
  }

  /** Adds call `id` (ids are nonzero int32s, not in the table already). */
  set(id: number, call: T): void {
    const slot = id & (kSlots - 1);
    if (this.slots[slot] === undefined) {
      this.slots[slot] = call;
      this.ids[slot] = id;
      this.inSlots++;
    } else {
      this.overflow.set(id, call);
    }
  }

  /** Call `id`, taken out of the table; undefined when it is not in it. */
  take(id: number): T | undefined {
    const slot = id & (kSlots - 1);
    const call = this.slots[slot];
    if (call !== undefined && this.ids[slot] === id) {
      this.slots[slot] = undefined;
      this.inSlots--;
      return call;
    }
    const other = this.overflow.get(id);
    if (other !== undefined) this.overflow.delete(id);
    return other;
  }

  /** Every call in the table, in no particular order. */
  values(): T[] {
    const calls: T[] = [];
    for (let slot = 0; slot < kSlots && calls.length < this.inSlots; slot++) {
      const call = this.slots[slot];
      if (call !== undefined) calls.push(call);
    }
    calls.push(...this.overflow.values());
    return calls;
  }

  /** Every call, taken out of the table. */
  takeAll(): T[] {
    const calls = this.values();
    this.slots.fill(undefined);
    this.inSlots = 0;
    this.overflow.clear();
    return calls;
  }
}
