/** Several tensors in one buffer and back: how a fused response runs over one packed buffer (fusion.ts). */
import type { TypedArray } from '../../core/types.js';

/** Copies `parts` back to back into `into` (which has room for all of them). */
export function pack(parts: readonly TypedArray[], into: TypedArray): void {
  let offset = 0;
  for (const part of parts) {
    into.set(part as never, offset);
    offset += part.length;
  }
}

/** Copies the consecutive slices of `from` back into `parts`. */
export function unpack(from: TypedArray, parts: readonly TypedArray[]): void {
  let offset = 0;
  for (const part of parts) {
    part.set(from.subarray(offset, offset + part.length) as never);
    offset += part.length;
  }
}
