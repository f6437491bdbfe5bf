/**
 * Allreduce through hubs, for groups that mix browser ranks (leaves, on slow links) with Node
 * ranks (hubs): hubs.ts.
 *
 * How it works: the buffer is cut into segments of four times `segmentBytes`. A leaf sends its
 * segments to its hub and receives the results back, nothing else. A hub, segment after segment:
 * receives the segment of each of its leaves (receives posted `pipelineDepth` segments ahead,
 * into pooled scratch), reduces them into its own in leaf order, allreduces the segment with the
 * other hubs (allreduce.ts: recursive doubling or the ring, by length), finishes an 'average'
 * (divides by the group's size) and sends the segment to its leaves. So while the hubs reduce
 * segment s, the leaves' next segments are on their way in and segment s − 1 on its way out.
 * Every rank ends with the same bits: the hubs' allreduce gives every hub the same sum, which
 * its leaves receive as it is.
 *
 * Cost, for M bytes, L leaves on H hubs: a leaf sends M and receives M, where the ring makes
 * every rank send and receive 2(N−1)/N·M, and every one of a leaf's messages crosses one slow
 * link instead of the ring's hops from tab to tab. A hub moves ⌈L/H⌉·M each way to its leaves
 * plus the hubs' allreduce of M among H ranks on fast links. docs/algorithms.md has the formula
 * and docs/browser.md the figures.
 *
 * Tags: all phases share the collective's tag. A hub's leaves are never hubs, so the star's
 * messages and the hubs' allreduce never share a peer; the hubs run their allreduces one
 * segment after another in the same order, and the transport matches first-in first-out per
 * (peer, tag).
 */
import type { HierarchicalMode, ReduceOp, TypedArray, WireDType } from '../core/types.js';
import { bytesOf, type Transport } from '../transport/transport.js';
import { allreduce, allreduceAlgorithm } from './allreduce.js';
import type { Hubs } from './hubs.js';
import { type AlgorithmOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { elementwiseOf, finishOf, reduceDType } from './reduce.js';
import { segmentCount, segmentLength } from './segments.js';
import { withScratch } from './tree_gather.js';

/** A hub segment is this many algorithm segments: fewer, larger steps for the hubs' allreduces. */
const kSegmentsPerHubSegment = 4;

/**
 * Reduces `buf` element-wise across the group of `hubs`, in place. Every rank passes the same
 * length, dtype, op, tag and options.
 *
 * @example
 *   await hubAllreduce(hubsOf(transport, leaves), gradients, 'average', tag, { pool });
 */
export async function hubAllreduce(
  hubs: Hubs,
  buf: TypedArray,
  op: ReduceOp,
  tag: number,
  options?: AlgorithmOptions,
): Promise<void> {
  const dtype = reduceDType(buf, op);
  const resolved = resolveOptions(options);
  if (buf.length === 0) return;
  const per = Math.max(1, Math.floor((resolved.segmentBytes * kSegmentsPerHubSegment) / buf.BYTES_PER_ELEMENT));
  const segments = new Segments(buf, per);
  if (hubs.hubs === undefined) return leafPart(hubs.star, segments, tag);
  return hubPart(hubs, hubs.hubs, segments, { dtype, op, tag, resolved, options });
}

/**
 * Whether an allreduce of `bytes` runs through hubs in `mode` (the hierarchical mode: hubs are
 * the hierarchy of a job with browser ranks); `hubs` is undefined where the group has none.
 * 'auto': where the flat allreduce would run the ring (or Rabenseifner's), the sizes where a leaf's bytes count;
 * never under a forced allreduce (options.algorithms), which then runs flat as asked.
 */
export function allreduceRunsThroughHubs(
  mode: HierarchicalMode,
  hubs: Hubs | undefined,
  bytes: number,
  options?: AlgorithmOptions,
): hubs is Hubs {
  if (hubs === undefined || mode === 'off') return false;
  if (mode === 'on') return true;
  if (options?.algorithms?.allreduce !== undefined) return false;
  return allreduceAlgorithm(hubs.size, bytes, resolveOptions(options)) !== 'recursive_doubling';
}

class Segments {
  readonly count: number;

  constructor(
    private readonly buf: TypedArray,
    readonly per: number,
  ) {
    this.count = segmentCount(buf.length, per);
  }

  length(index: number): number {
    return segmentLength(this.buf.length, this.per, index);
  }

  at(index: number): TypedArray {
    return this.buf.subarray(index * this.per, index * this.per + this.length(index));
  }
}

/** A leaf: every segment to the hub, every result back into place. */
async function leafPart(star: Hubs['star'], segments: Segments, tag: number): Promise<void> {
  const operations: Promise<void>[] = [];
  for (let s = 0; s < segments.count; s++) operations.push(star.send(0, tag, bytesOf(segments.at(s))));
  // A result lands only after the hub had this segment whole: never over bytes still being sent.
  for (let s = 0; s < segments.count; s++) operations.push(star.recv(0, tag, bytesOf(segments.at(s))));
  await settled(operations);
}

interface Call {
  dtype: WireDType;
  op: ReduceOp;
  tag: number;
  resolved: ResolvedOptions;
  options: AlgorithmOptions | undefined;
}

/** A hub: its leaves' segments in, reduced with the other hubs, results out to its leaves. */
async function hubPart(layout: Hubs, hubs: Transport, segments: Segments, call: Call): Promise<void> {
  const { dtype, op, tag, resolved, options } = call;
  const { star } = layout;
  const leaves = star.size - 1;
  const depth = resolved.pipelineDepth;
  const { per } = segments;
  const elementwise = elementwiseOf(op);
  const kernel = resolved.kernels(dtype, elementwise);
  const finish = finishOf(op, layout.size);
  await withScratch(dtype, depth * leaves * per, resolved.pool, async (scratch) => {
    const slice = (s: number, leaf: number) => {
      const start = ((s % depth) * leaves + leaf) * per;
      return scratch.subarray(start, start + segments.length(s));
    };
    const pending: Promise<void>[] = [];
    const track = (operation: Promise<void>) => {
      // Awaited in order or at the end: a rejection here is never unhandled meanwhile.
      operation.catch(() => {});
      pending.push(operation);
      return operation;
    };
    const gathers: Promise<void>[] = [];
    /** Posts the receives of segment `s` from every leaf. */
    const gather = (s: number) => {
      if (s >= segments.count) return;
      const receives = Array.from({ length: leaves }, (_, j) => track(star.recv(j + 1, tag, bytesOf(slice(s, j)))));
      gathers[s] = Promise.all(receives).then(() => {});
      gathers[s].catch(() => {});
    };
    let failure: { error: unknown } | undefined;
    try {
      for (let s = 0; s < depth; s++) gather(s);
      for (let s = 0; s < segments.count; s++) {
        await gathers[s];
        const segment = segments.at(s);
        for (let j = 0; j < leaves; j++) kernel(segment, 0, slice(s, j), 0, segment.length);
        gather(s + depth);
        if (hubs.size > 1) await allreduce(hubs, segment, elementwise, tag, options);
        finish?.(segment, 0, segment.length);
        for (let j = 0; j < leaves; j++) track(star.send(j + 1, tag, bytesOf(segment)));
      }
    } catch (error) {
      failure = { error };
    }
    // Nothing may still write into the scratch when the pool takes it back.
    const results = await Promise.allSettled(pending);
    if (failure) throw failure.error;
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  });
}

/** Waits for every operation; then rethrows the first failure, if any. */
async function settled(operations: readonly Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(operations);
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}
