/**
 * A pending send or recv: its promise's settle functions (settle-once, so a failure racing a
 * completion is harmless), and the progress clock the transport's single watchdog timer reads.
 */

export type OpKind = 'recv' | 'send' | 'control';

export class PendingOp {
  /** performance.now() of the last byte moved for this op (or of its posting). */
  lastProgress = performance.now();
  private settled = false;

  constructor(
    readonly kind: OpKind,
    readonly peer: number,
    readonly tag: number,
    private readonly registry: Set<PendingOp>,
    private readonly onResolve: () => void,
    private readonly onReject: (error: Error) => void,
  ) {
    registry.add(this);
  }

  get done(): boolean {
    return this.settled;
  }

  resolve(): void {
    if (this.settled) return;
    this.settled = true;
    this.registry.delete(this);
    this.onResolve();
  }

  reject(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.registry.delete(this);
    this.onReject(error);
  }
}

/** Creates an op registered in `registry` and the promise it settles. */
export function startOp(kind: OpKind, peer: number, tag: number, registry: Set<PendingOp>): [PendingOp, Promise<void>] {
  let op: PendingOp | undefined;
  const promise = new Promise<void>((resolve, reject) => {
    op = new PendingOp(kind, peer, tag, registry, resolve, reject);
  });
  return [op as PendingOp, promise];
}

/** A FIFO queue with O(1) push and shift (Array#shift is O(n) on long queues). */
export class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  *drain(): Generator<T> {
    for (let item = this.shift(); item !== undefined; item = this.shift()) yield item;
  }
}
