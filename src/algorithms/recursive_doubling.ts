/**
 * Recursive-doubling allreduce: the latency path for small buffers.
 *
 * How it works: with p the largest power of two <= N and rem = N - p, the first 2·rem ranks pair
 * up (2i, 2i + 1): the even one sends its buffer to the odd one, which reduces it in, and sits out.
 * The p remaining ranks, renumbered 0..p-1, run log2(p) rounds: in round k, rank v exchanges its
 * whole buffer with v XOR 2^k and reduces what it receives. Finally each odd rank of the first
 * pairs sends the result back to its even partner. Every rank then holds the same bits: each
 * exchange combines the same two operands on both sides, and the reduce ops are commutative.
 *
 * Cost: log2(p) steps (+2 when N is not a power of two), each moving the whole buffer, so
 * log2(N)·M bytes per rank against the ring's 2(N-1)/N·M in 2(N-1) steps. For a small M the step
 * count is what costs: with 2 ranks this is one exchange instead of the ring's two. The executor
 * picks it below `latencyMaxBytes` (options.ts).
 */
import type { ReduceOp, TypedArray } from '../core/types.js';
import { bytesOf, type Transport } from '../transport/transport.js';
import { type AlgorithmOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';

/**
 * Reduces `buf` element-wise across all ranks, in place. Every rank passes the same length,
 * dtype, op and tag.
 *
 * @example
 *   await recursiveDoublingAllreduce(transport, new Float32Array([loss]), 'average', tag);
 */
export async function recursiveDoublingAllreduce(
  transport: Transport,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const resolved = resolveOptions(options);
  const { rank, size } = transport;
  if (size === 1 || buf.length === 0) return;
  const kernel = resolved.kernels(dtype, elementwiseOf(op));
  const finish = finishOf(op, size);
  const bytes = bytesOf(buf);
  const pool = resolved.pool;
  const scratchBuffer = pool?.acquire(bytes.byteLength) ?? new ArrayBuffer(bytes.byteLength);
  try {
    const scratch = new (buf.constructor as new (b: ArrayBuffer, o: number, n: number) => TypedArray)(
      scratchBuffer,
      0,
      buf.length,
    );
    const scratchBytes = bytesOf(scratch);
    let p = 1;
    while (p * 2 <= size) p *= 2;
    const rem = size - p;
    // Pre-step: the first 2·rem ranks fold pairwise into their odd member.
    let v: number;
    if (rank < 2 * rem) {
      if (rank % 2 === 0) {
        await transport.send(rank + 1, tag, bytes);
        await transport.recv(rank + 1, tag, bytes); // the finished result, average included
        return;
      }
      await transport.recv(rank - 1, tag, scratchBytes);
      kernel(buf, 0, scratch, 0, buf.length);
      v = rank >> 1;
    } else {
      v = rank - rem;
    }
    for (let mask = 1; mask < p; mask <<= 1) {
      const partnerV = v ^ mask;
      const partner = partnerV < rem ? partnerV * 2 + 1 : partnerV + rem;
      await exchange(transport, partner, tag, bytes, scratchBytes);
      kernel(buf, 0, scratch, 0, buf.length);
    }
    finish?.(buf, 0, buf.length);
    if (rank < 2 * rem) await transport.send(rank - 1, tag, bytes);
  } finally {
    // Every send and recv above was awaited: nothing can still write into the scratch.
    if (pool) pool.release(scratchBuffer);
  }
}

async function exchange(transport: Transport, peer: number, tag: number, send: Uint8Array, into: Uint8Array): Promise<void> {
  const sent = transport.send(peer, tag, send);
  const received = transport.recv(peer, tag, into);
  // Settle both before returning, even on failure: the caller reuses both buffers.
  const [s, r] = await Promise.allSettled([sent, received]);
  if (s.status === 'rejected') throw s.reason;
  if (r.status === 'rejected') throw r.reason;
}
