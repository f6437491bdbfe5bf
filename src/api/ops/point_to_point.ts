/** send and recv on the caller's side: options, the message copied at call time, and the filled buffer. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { PeerRequest } from '../../engine/point_to_point.js';
import type { CallContext, Prepared } from '../call.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, type ParsedTensor, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.send} and {@link RingReduce.sendSync}: the receiver, and the tag its recv names. */
export interface SendOptions {
  /** The receiving rank. */
  to: number;
  /** Matches the receiver's recv with the same tag (messages of one tag arrive in order). Default 0. */
  tag?: number;
  /**
   * How long the send waits for the receiver to post a matching recv before it is withdrawn and
   * fails with TimeoutError (the receiver never sees it). Default: the job's stall timeout.
   */
  timeoutMs?: number;
}

/** Options of {@link RingReduce.recv} and {@link RingReduce.recvSync}: the sender, and the tag its send names. */
export interface RecvOptions {
  /** The sending rank. */
  from: number;
  /** Default 0. */
  tag?: number;
  /**
   * How long the recv waits for a matching send before it fails with TimeoutError naming the
   * sender (a later send no longer matches it). Default: the job's stall timeout.
   */
  timeoutMs?: number;
}

/** User tags: non-negative integers below 2^31; the tags above are the library's own (monitoredBarrier). */
const kMaxUserTag = 2 ** 31 - 1;

/** The longest timeout a timer takes (a larger one would fire at once). */
const kMaxTimeoutMs = 2 ** 31 - 1;

export function prepareSend(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['to', 'tag', 'timeoutMs']);
  const t = parseTensor(tensor);
  const to = parsePeer(o.to, 'to', ctx);
  const request = peerRequest(ctx, 'send', to, parseTag(o.tag), t, parseTimeout(o.timeoutMs));
  // Copied now: the caller may reuse its tensor as soon as send returns.
  const { buffer, staging } = copyToStaging(ctx, t);
  return { request, buffer, staging, finish: () => undefined };
}

export function prepareRecv(ctx: CallContext, into: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['from', 'tag', 'timeoutMs']);
  const t = parseTensor(into, 'into');
  const from = parsePeer(o.from, 'from', ctx);
  const request = peerRequest(ctx, 'recv', from, parseTag(o.tag), t, parseTimeout(o.timeoutMs));
  return receiving(ctx, request, t, into);
}

/** A message of the library's own, under a tag no user message has (≥ 2^31): arguments trusted. */
export interface SystemPeerOptions {
  peer: number;
  tag: number;
  timeoutMs: number;
}

export function prepareSystemSend(ctx: CallContext, data: unknown, options: unknown): Prepared {
  const { peer, tag, timeoutMs } = options as SystemPeerOptions;
  const t = parseTensor(data);
  const { buffer, staging } = copyToStaging(ctx, t);
  return { request: peerRequest(ctx, 'send', peer, tag, t, timeoutMs), buffer, staging, finish: () => undefined };
}

export function prepareSystemRecv(ctx: CallContext, into: unknown, options: unknown): Prepared {
  const { peer, tag, timeoutMs } = options as SystemPeerOptions;
  const t = parseTensor(into, 'into');
  return receiving(ctx, peerRequest(ctx, 'recv', peer, tag, t, timeoutMs), t, into);
}

function receiving(ctx: CallContext, request: PeerRequest, t: ParsedTensor, into: unknown): Prepared {
  // The engine writes into shared memory; the message reaches `into` once it is complete.
  const { buffer, staging } = copyToStaging(ctx, t);
  return {
    request,
    buffer,
    staging,
    finish: () => {
      t.data.set(buffer as never);
      return into;
    },
  };
}

function peerRequest(
  ctx: CallContext,
  op: 'send' | 'recv',
  peer: number,
  tag: number,
  t: ParsedTensor,
  timeoutMs: number | undefined,
): PeerRequest {
  const way = op === 'send' ? `to ${peer}` : `from ${peer}`;
  const name = ctx.nameFor(op, undefined, `${op} ${way}, tag ${tag}`);
  const request: PeerRequest = { op, name, peer, tag, dtype: t.dtype, length: t.data.length };
  if (timeoutMs !== undefined) request.timeoutMs = timeoutMs;
  return request;
}

/** Option 'timeoutMs': a positive number of ms a timer can take; unset: the job's stall timeout. */
export function parseTimeout(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0) || value > kMaxTimeoutMs) {
    throw new InvalidArgumentError(`option 'timeoutMs' must be a number of ms in (0, 2^31), got ${JSON.stringify(value)}`);
  }
  return Math.ceil(value);
}

function parsePeer(value: unknown, option: string, ctx: CallContext): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) >= ctx.size || value === ctx.rank) {
    throw new InvalidArgumentError(
      `option '${option}' must be another rank in [0, ${ctx.size - 1}] (this is rank ${ctx.rank}), got ${JSON.stringify(value)}`,
    );
  }
  return value as number;
}

function parseTag(value: unknown): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > kMaxUserTag) {
    throw new InvalidArgumentError(`option 'tag' must be an integer in [0, 2^31), got ${JSON.stringify(value)}`);
  }
  return value as number;
}
