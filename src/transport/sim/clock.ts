/**
 * The virtual clock of the simulator: a discrete-event loop that runs real promise-based code
 * (the algorithms) in virtual time.
 *
 * How it works: `at(time, target, kind)` files an action in a binary heap ordered by (time, filing
 * order). One turn of the loop (a setImmediate) sets `now` to the earliest time in the heap and
 * runs every action filed for that time, in filing order. The actions resolve promises; their
 * continuations (the algorithms' next sends and receives) run as microtasks after the turn, see
 * `now` unchanged, and file new actions; the next turn starts only once they have all run, since
 * Node drains the microtask queue before any macrotask. So virtual time never goes backwards,
 * and ranks that act at the same virtual time share one turn (a ring step of 1024 ranks is one
 * macrotask, not 1024).
 *
 * Determinism: the order of actions depends only on their times and filing order, and both
 * depend only on the code run and the model: the same inputs give the same virtual times, bit for
 * bit, whatever the machine's load.
 *
 * Idle: when a turn finds the heap empty, `onIdle` runs (the transport uses it to time out
 * receives that nothing can satisfy any more). The loop schedules nothing while the heap is
 * empty, so an idle clock keeps no handle alive.
 */

/** What the clock calls: an object (no closure to allocate per action) and a small integer saying what happened. */
export interface Timed {
  fire(kind: number): void;
}

export class VirtualClock {
  /** Seconds of virtual time since the clock was made. */
  now = 0;
  /** Runs when a turn finds nothing left to do. */
  onIdle: (() => void) | undefined;
  private readonly times: number[] = [];
  private readonly orders: number[] = [];
  private readonly targets: Timed[] = [];
  private readonly kinds: number[] = [];
  private filed = 0;
  private scheduled = false;

  /** Calls `target.fire(kind)` at virtual time `time` (no earlier than now). */
  at(time: number, target: Timed, kind = 0): void {
    this.push(Math.max(time, this.now), this.filed++, target, kind);
    this.wake();
  }

  /** Calls `visit` with the target of every action waiting to run, in no particular order. */
  forEachPending(visit: (target: Timed) => void): void {
    for (const target of this.targets) visit(target);
  }

  /** Actions waiting to run. */
  get pending(): number {
    return this.targets.length;
  }

  /** Makes sure a turn comes, so that idleness is noticed even when nothing was filed. */
  wake(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.turn);
  }

  private readonly turn = (): void => {
    this.scheduled = false;
    if (this.targets.length === 0) {
      this.onIdle?.();
      return;
    }
    const time = this.times[0] as number;
    this.now = time;
    while (this.targets.length > 0 && this.times[0] === time) {
      const kind = this.kinds[0] as number;
      this.pop().fire(kind);
    }
    // Also when the heap is empty: the next turn then checks for idleness, after the microtasks.
    this.wake();
  };

  private push(time: number, order: number, target: Timed, kind: number): void {
    const { times, orders, targets, kinds } = this;
    let i = targets.length;
    times.push(time);
    orders.push(order);
    targets.push(target);
    kinds.push(kind);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(time, order, times[parent] as number, orders[parent] as number)) break;
      this.move(parent, i);
      i = parent;
    }
    times[i] = time;
    orders[i] = order;
    targets[i] = target;
    kinds[i] = kind;
  }

  /** Removes the earliest action (the caller read its kind) and returns its target. */
  private pop(): Timed {
    const { times, orders, targets, kinds } = this;
    const top = targets[0] as Timed;
    const lastTime = times.pop() as number;
    const lastOrder = orders.pop() as number;
    const lastTarget = targets.pop() as Timed;
    const lastKind = kinds.pop() as number;
    const n = targets.length;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      const right = child + 1;
      if (right < n && before(times[right] as number, orders[right] as number, times[child] as number, orders[child] as number)) {
        child = right;
      }
      if (!before(times[child] as number, orders[child] as number, lastTime, lastOrder)) break;
      this.move(child, i);
      i = child;
    }
    times[i] = lastTime;
    orders[i] = lastOrder;
    targets[i] = lastTarget;
    kinds[i] = lastKind;
    return top;
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from] as number;
    this.orders[to] = this.orders[from] as number;
    this.targets[to] = this.targets[from] as Timed;
    this.kinds[to] = this.kinds[from] as number;
  }
}

function before(timeA: number, orderA: number, timeB: number, orderB: number): boolean {
  return timeA < timeB || (timeA === timeB && orderA < orderB);
}
