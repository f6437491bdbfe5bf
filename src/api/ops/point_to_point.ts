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
}

/** Options of {@link RingReduce.recv} and {@link RingReduce.recvSync}: the sender, and the tag its send names. */
export interface RecvOptions {
  /** The sending rank. */
  from: number;
  /** Default 0. */
  tag?: number;
}

/** User tags: non-negative integers below 2^31. */
const kMaxUserTag = 2 ** 31 - 1;

export function prepareSend(ctx: CallContext, tensor: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['to', 'tag']);
  const t = parseTensor(tensor);
  const to = parsePeer(o.to, 'to', ctx);
  const request = peerRequest(ctx, 'send', to, parseTag(o.tag), t);
  // Copied now: the caller may reuse its tensor as soon as send returns.
  const { buffer, staging } = copyToStaging(ctx, t);
  return { request, buffer, staging, finish: () => undefined };
}

export function prepareRecv(ctx: CallContext, into: unknown, options: unknown): Prepared {
  const o = checkOptions(options, ['from', 'tag']);
  const t = parseTensor(into, 'into');
  const from = parsePeer(o.from, 'from', ctx);
  const request = peerRequest(ctx, 'recv', from, parseTag(o.tag), t);
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

function peerRequest(ctx: CallContext, op: 'send' | 'recv', peer: number, tag: number, t: ParsedTensor): PeerRequest {
  const way = op === 'send' ? `to ${peer}` : `from ${peer}`;
  return { op, name: ctx.nameFor(op, undefined, `${op} ${way}, tag ${tag}`), peer, tag, dtype: t.dtype, length: t.data.length };
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
