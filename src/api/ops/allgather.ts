/** allgather on the caller's side: options, the input copy into pooled memory, and the result. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { Compression, TypedArray } from '../../core/types.js';
import type { AllgatherRequest } from '../../engine/ops/registry.js';
import { type CallContext, type Prepared, resultLike } from '../call.js';
import { compressToStaging, decompress, parseCompression } from '../compression.js';
import type { Completion } from '../engine_client.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, parseGatherOut, parseName, parseTensor } from '../tensor_args.js';

/**
 * Options of {@link RingReduce.allgather}, {@link RingReduce.allgatherSync} and
 * {@link RingReduce.groupedAllgather}; the module's functions take the same.
 */
export interface AllgatherOptions {
  /** Run in this process set (ranks, roots and names inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  name?: string;
  /**
   * Write the result here instead of into fresh memory (SharedArrayBuffer-backed, the tensor's
   * dtype, exactly as long as the gathered result: the sum of every rank's first dimension times
   * the elements per row). A wrong length fails on every rank with InvalidArgumentError.
   */
  out?: TypedArray;
  /**
   * 'fp16' sends a float32 tensor as IEEE half precision (Horovod's Compression.fp16): half the
   * bytes on the wire, the result decoded back to float32.
   * Values round to nearest even; beyond ±65504 they become ±Infinity, below 2^-24 they flush
   * to zero. Every rank must pass the same compression. Other dtypes are refused. Default 'none'.
   */
  compression?: Compression;
}

export function prepareAllgather(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['name', 'out', 'processSet', 'timeoutMs', 'compression']);
  const t = parseTensor(tensor);
  if (t.shape.length === 0) {
    throw new InvalidArgumentError('tensor of allgather must have at least one dimension (it is concatenated along the first)');
  }
  const out = parseGatherOut(o.out, t);
  const compressed = parseCompression(o.compression, t) === 'fp16';
  // The engine needs the input in shared memory; the output's size is known only after negotiation.
  const { buffer, staging } = compressed ? compressToStaging(ctx, t) : copyToStaging(ctx, t);
  const request: AllgatherRequest = {
    name: ctx.nameFor('allgather', parseName(o.name)),
    op: 'allgather',
    dtype: compressed ? 'float16' : t.dtype,
    shape: t.shape,
  };
  if (out) request.outLength = out.length;
  if (compressed) {
    // The engine gathers halves into memory of its own; they are decoded into `out` or fresh memory.
    const finish = (completion: Completion) =>
      resultLike(
        t,
        decompress(ctx, t, completion.output as Uint16Array, out as Float32Array | undefined),
        completion.shape ?? t.shape,
      );
    return { request, buffer, staging, finish };
  }
  const prepared: Prepared = {
    request,
    buffer,
    staging,
    finish: (completion) => resultLike(t, completion.output ?? (out as TypedArray), completion.shape ?? t.shape),
  };
  if (out) prepared.output = out;
  return prepared;
}
