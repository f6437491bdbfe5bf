/**
 * Option 'compression' (Horovod's Compression.fp16), on the caller's side: a float32 tensor is
 * encoded to fp16 into pooled shared memory, the engine moves and reduces those halves (the wire
 * dtype 'float16': half the bytes, reductions computed in float32, engine/ops and
 * algorithms/reduce_half.ts), and the result is decoded back to float32 for the caller.
 *
 * Only float32 tensors take 'fp16': fp16 is no smaller than 8- and 16-bit integers, would
 * silently lose integers above 2048, and float64 would lose more than the caller asked to trade.
 * So any other dtype is an InvalidArgumentError naming the option (Horovod passes them through
 * uncompressed; an error tells the caller instead of doing something else than asked).
 */
import { viewOf } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { Float16Bits } from '../core/float16.js';
import { type Compression, kCompressions } from '../core/types.js';
import type { CallContext } from './call.js';
import type { ParsedTensor } from './tensor_args.js';

/** Option 'compression': 'none' (the default) or 'fp16', which needs a float32 tensor. */
export function parseCompression(value: unknown, t: ParsedTensor): Compression {
  if (value === undefined) return 'none';
  if (!kCompressions.includes(value as Compression)) {
    throw new InvalidArgumentError(
      `option 'compression' must be one of ${kCompressions.join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  if (value === 'fp16' && t.dtype !== 'float32') {
    throw new InvalidArgumentError(
      `option 'compression' is 'fp16' but the tensor is ${t.dtype}: fp16 compression takes float32 tensors only`,
    );
  }
  return value as Compression;
}

/** `length` halves in pooled shared memory (contents stale), and that memory. */
export function stagedHalves(ctx: CallContext, length: number): { buffer: Float16Bits; staging: SharedArrayBuffer } {
  const staging = ctx.staging.acquire(length * 2);
  return { buffer: viewOf('float16', staging, 0, length) as Float16Bits, staging };
}

/** The tensor encoded to fp16 in pooled shared memory. */
export function compressToStaging(ctx: CallContext, t: ParsedTensor): { buffer: Float16Bits; staging: SharedArrayBuffer } {
  const staged = stagedHalves(ctx, t.data.length);
  ctx.halves().encode(t.data as Float32Array, staged.buffer);
  return staged;
}

/** `halves` decoded into `out`, or into fresh float32 memory like an uncompressed result's. */
export function decompress(ctx: CallContext, t: ParsedTensor, halves: Uint16Array, out: Float32Array | undefined): Float32Array {
  const result = out ?? (ctx.fresh(t, halves.length) as Float32Array);
  ctx.halves().decode(halves, result);
  return result;
}
