/**
 * Packing several tensors end to end into one flat buffer, and back.
 *
 * Fusing a training step's gradients into one buffer turns N small collectives (each paying a
 * negotiation round and the ring's 2·(size−1) latency steps) into one. The layout is computed
 * from the element counts only, so every rank derives the same offsets from the same model.
 */

/** The typed arrays a layout packs: the element types of float32, int32 and bool tensors. */
export type FlatArray = Float32Array | Int32Array | Uint8Array;

export class FlatLayout {
  /** Element offset of each part in the flat buffer. */
  readonly offsets: readonly number[];
  /** Total number of elements. */
  readonly total: number;

  constructor(readonly sizes: readonly number[]) {
    const offsets: number[] = [];
    let total = 0;
    for (const size of sizes) {
      if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`part size ${size} is not a non-negative integer`);
      offsets.push(total);
      total += size;
    }
    this.offsets = offsets;
    this.total = total;
  }

  /** Copies `parts` (one per size, in order) into `target`, which must hold `total` elements. */
  pack<T extends FlatArray>(parts: readonly ArrayLike<number>[], target: T): T {
    this.check(parts, target);
    for (let i = 0; i < parts.length; i++) target.set(parts[i] as ArrayLike<number>, this.offsets[i]);
    return target;
  }

  /**
   * Adds `parts` (one per size, in order) element-wise into `target`, which must hold `total`
   * elements: the running sum of several steps' gradients, without a new buffer.
   */
  accumulate(parts: readonly ArrayLike<number>[], target: Float32Array): Float32Array {
    this.check(parts, target);
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] as ArrayLike<number>;
      const offset = this.offsets[i] as number;
      for (let j = 0; j < part.length; j++) target[offset + j] += part[j] as number;
    }
    return target;
  }

  /** Views (no copies) of each part inside `flat`. */
  unpack<T extends FlatArray>(flat: T): T[] {
    if (flat.length !== this.total) throw new RangeError(`flat buffer holds ${flat.length} elements, layout needs ${this.total}`);
    return this.sizes.map((size, i) => flat.subarray(this.offsets[i], (this.offsets[i] as number) + size) as T);
  }

  private check(parts: readonly ArrayLike<number>[], target: FlatArray): void {
    if (parts.length !== this.sizes.length) {
      throw new RangeError(`expected ${this.sizes.length} parts, got ${parts.length}`);
    }
    if (target.length !== this.total) throw new RangeError(`target holds ${target.length} elements, layout needs ${this.total}`);
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] as ArrayLike<number>;
      if (part.length !== this.sizes[i])
        throw new RangeError(`part ${i} has ${part.length} elements, layout says ${this.sizes[i]}`);
    }
  }
}
