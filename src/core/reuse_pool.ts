/**
 * Byte arrays kept for reuse by exact length, for messages of a training loop that repeat at the
 * same sizes step after step (an eager tensor's copy, its encoded report): a reused array is
 * memory already touched, where a fresh one pays its page faults (first touch is slow on a VM).
 *
 * Unlike BufferPool (whole power-of-two buffers lent and returned), an array taken here needs no
 * return: one that is dropped is left to the garbage collector, so an owner gives back only the
 * arrays it knows are free and forgets the rest.
 */
export class ReusePool {
  private readonly free = new Map<number, Uint8Array[]>();
  private kept = 0;

  /** @param maxKeptBytes free bytes kept; arrays given back beyond it are left to the GC. */
  constructor(private readonly maxKeptBytes: number) {}

  /** An array of `length` bytes: a free one (holding old bytes) or a fresh one. */
  readonly take = (length: number): Uint8Array => {
    const reused = this.free.get(length)?.pop();
    if (reused === undefined) return new Uint8Array(length);
    this.kept -= length;
    return reused;
  };

  /** `array` is free: the next take of its length may return it. */
  give(array: Uint8Array): void {
    if (this.kept + array.byteLength > this.maxKeptBytes) return;
    let free = this.free.get(array.byteLength);
    if (!free) {
      free = [];
      this.free.set(array.byteLength, free);
    }
    free.push(array);
    this.kept += array.byteLength;
  }
}
