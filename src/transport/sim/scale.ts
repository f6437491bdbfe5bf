/**
 * Scaling a simulated buffer down to a real one (sim_transport.ts, "Large buffers without real
 * memory"): the byteScale of the world, the real element count, and the segment length to hand
 * the algorithm so that it cuts the small buffer exactly as it would cut the large one.
 *
 * The scale is the largest power of two that leaves at least `kMinBlockElements` elements per
 * rank in the real buffer (so that per-rank blocks keep their proportions), keeps a segment at
 * least one element long, divides the simulated size exactly, and keeps a buffer that splits
 * evenly among the ranks splitting evenly. Where the split is uneven, block lengths differ by one
 * element of the small buffer instead of one of the large: up to 1/16 of a block. Every other byte threshold
 * given to an algorithm divides by the same scale (treeMaxBytes defaults to segmentBytes, so it
 * follows), and every per-byte cost (β, γ of a cost model) multiplies by it.
 */
import { InvalidArgumentError } from '../../core/errors.js';

/** Real elements kept per rank at least, so that block lengths round by at most 1/16. */
export const kMinBlockElements = 16;

export interface ScaledBuffer {
  /** Elements of the real buffer. */
  readonly elements: number;
  /** Simulated bytes per real byte: the world's byteScale. */
  readonly byteScale: number;
  /** The segmentBytes to pass to the algorithm: the simulated one divided by byteScale. */
  readonly segmentBytes: number;
}

export function scaleDown(bytes: number, elementBytes: number, ranks: number, segmentBytes: number): ScaledBuffer {
  for (const [name, value] of [
    ['bytes', bytes],
    ['elementBytes', elementBytes],
    ['ranks', ranks],
    ['segmentBytes', segmentBytes],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < (name === 'bytes' ? 0 : 1)) {
      throw new InvalidArgumentError(`${name} must be a positive integer, got ${value}`);
    }
  }
  if (bytes % elementBytes !== 0)
    throw new InvalidArgumentError(`bytes (${bytes}) must be whole elements of ${elementBytes} bytes`);
  const floor = ranks * kMinBlockElements * elementBytes;
  let scale = 1;
  for (;;) {
    const next = scale * 2;
    const fits = bytes / next >= floor && segmentBytes / next >= elementBytes && (segmentBytes / next) % elementBytes === 0;
    if (!fits || bytes % (next * elementBytes) !== 0 || segmentBytes % next !== 0) break;
    // Blocks that split evenly stay even.
    const even = (elements: number) => elements % ranks === 0;
    if (even(bytes / elementBytes / scale) && !even(bytes / elementBytes / next)) break;
    scale = next;
  }
  return { elements: bytes / elementBytes / scale, byteScale: scale, segmentBytes: segmentBytes / scale };
}
