/** send and recv on the caller's side: options, the message copied at call time, and the filled buffer. */
import { InvalidArgumentError } from '../../core/errors.js';
import type { TensorLike } from '../../core/types.js';
import { kAnyPeer, type PeerCall } from '../../engine/wire/peer_request.js';
import type { CallContext, Prepared } from '../call.js';
import type { Completion } from '../engine_client.js';
import type { ProcessSet } from '../process_set.js';
import { copyToStaging } from '../staging.js';
import { checkOptions, type ParsedTensor, parseTensor } from '../tensor_args.js';

/** Options of {@link RingReduce.send} and {@link RingReduce.sendSync}: the receiver, and the tag its recv names. */
export interface SendOptions {
  /** The receiving rank (a rank of `processSet` when given). */
  to: number;
  /** Matches the receiver's recv with the same tag (messages of one tag arrive in order). Default 0. */
  tag?: number;
  /**
   * How long the send waits for the receiver to post a matching recv before it is withdrawn and
   * fails with TimeoutError (the receiver never sees it). Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /**
   * Send within this process set: `to` is a rank of the set, and only a recv of the same set
   * matches the message (torch's `group`). Default: the whole job.
   */
  processSet?: ProcessSet;
}

/** Options of {@link RingReduce.recv} and {@link RingReduce.recvSync}: the sender, and the tag its send names. */
export interface RecvOptions {
  /**
   * The sending rank (a rank of `processSet` when given), or `'any'`: the first matching message
   * from any rank (torch's `src=None`); the recv then resolves to `{ data, from }`.
   */
  from: number | 'any';
  /** Default 0. */
  tag?: number;
  /**
   * How long the recv waits for a matching send before it fails with TimeoutError naming the
   * sender (a later send no longer matches it). Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** Receive within this process set: `from` is a rank of the set (see SendOptions.processSet). Default: the whole job. */
  processSet?: ProcessSet;
}

/** What a recv from `'any'` resolves to: the buffer passed, filled, and the rank that sent it (of the set, with `processSet`). */
export interface Received<T extends TensorLike = TensorLike> {
  data: T;
  from: number;
}

/** User tags: non-negative integers below 2^31; the tags above are the library's own (monitoredBarrier). */
const kMaxUserTag = 2 ** 31 - 1;

/** The longest timeout a timer takes (a larger one would fire at once). */
const kMaxTimeoutMs = 2 ** 31 - 1;

export function prepareSend(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const request = parseSend(ctx, tensor, options);
  // Copied now: the caller may reuse its tensor as soon as send returns.
  const { buffer, staging } = copyToStaging(ctx, request.t);
  return { request: request.call, buffer, staging, finish: () => undefined };
}

export function prepareRecv(ctx: CallContext, into: unknown, options: unknown): Prepared {
  const { call, t } = parseRecv(ctx, into, options);
  return receiving(ctx, call, t, into);
}

/** The options a send or recv takes (batchSendRecv's entries: these and the op's own keys). */
export const kSendOptions = ['to', 'tag', 'timeoutMs', 'processSet'] as const;
export const kRecvOptions = ['from', 'tag', 'timeoutMs', 'processSet'] as const;

/** A send's arguments, checked: its request and its tensor. */
export function parseSend(ctx: CallContext, tensor: unknown, options: unknown) {
  const o = checkOptions(options, kSendOptions);
  const t = parseTensor(tensor);
  const to = parsePeer(o.to, 'to', ctx);
  return { call: peerRequest(ctx, 'send', to, parseTag(o.tag), t, parseTimeout(o.timeoutMs)), t };
}

/** A recv's arguments, checked: its request and its buffer. */
export function parseRecv(ctx: CallContext, into: unknown, options: unknown) {
  const o = checkOptions(options, kRecvOptions);
  const t = parseTensor(into, 'into');
  const from = o.from === 'any' ? anyPeer(ctx) : parsePeer(o.from, 'from', ctx);
  return { call: peerRequest(ctx, 'recv', from, parseTag(o.tag), t, parseTimeout(o.timeoutMs)), t };
}

/**
 * What a recv resolves to once its data is in `into`: `into`, or `{ data: into, from }` for a
 * recv from any rank (`sender`: the job rank the engine reports, as the caller numbers it).
 */
export function receivedAs(ctx: CallContext, call: PeerCall, into: unknown, sender: number | undefined): unknown {
  if (call.peer !== kAnyPeer) return into;
  const from = ctx.set ? ctx.set.ranks.indexOf(sender as number) : (sender as number);
  return { data: into, from };
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

function receiving(ctx: CallContext, request: PeerCall, t: ParsedTensor, into: unknown): Prepared {
  // The engine writes into shared memory; the message reaches `into` once it is complete.
  const { buffer, staging } = copyToStaging(ctx, t);
  return {
    request,
    buffer,
    staging,
    finish: (completion: Completion) => {
      t.data.set(buffer as never);
      return receivedAs(ctx, request, into, completion.counts?.[0]);
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
): PeerCall {
  const way = peer === kAnyPeer ? 'from any' : op === 'send' ? `to ${peer}` : `from ${peer}`;
  const name = ctx.nameFor(op, undefined, `${op} ${way}, tag ${tag}`);
  // The engine matches job ranks; the caller's are the set's.
  const jobPeer = peer === kAnyPeer || !ctx.set ? peer : (ctx.set.ranks[peer] as number);
  const request: PeerCall = { op, name, peer: jobPeer, tag, dtype: t.dtype, length: t.data.length };
  if (timeoutMs !== undefined) request.timeoutMs = timeoutMs;
  if (ctx.set) request.set = ctx.set.id;
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
    const where = ctx.set ? ` of process set ${ctx.set.id}` : '';
    const any = option === 'from' ? " or 'any'" : '';
    throw new InvalidArgumentError(
      `option '${option}' must be another rank${where} in [0, ${ctx.size - 1}] (this is rank ${ctx.rank})${any}, got ${JSON.stringify(value)}`,
    );
  }
  return value as number;
}

function anyPeer(ctx: CallContext): number {
  if (ctx.size < 2) {
    const where = ctx.set ? `process set ${ctx.set.id}` : 'the job';
    throw new InvalidArgumentError(`option 'from' is 'any', but ${where} has no other rank to receive from`);
  }
  return kAnyPeer;
}

function parseTag(value: unknown): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > kMaxUserTag) {
    throw new InvalidArgumentError(`option 'tag' must be an integer in [0, 2^31), got ${JSON.stringify(value)}`);
  }
  return value as number;
}
