/**
 * batchSendRecv (torch's batch_isend_irecv) on the caller's side: every entry is checked before
 * anything is submitted, the entries' data share one staging buffer (each at an offset aligned to
 * 8 bytes), and the batch is one submission whose calls the engine starts all at once
 * (engine/execution/point_to_point.ts): a ring or an exchange written as one batch cannot deadlock, also
 * from the blocking twin, which could not post a recv while its send waits.
 */
import { bytesPerElement, viewOf } from '../../core/dtypes.js';
import { InvalidArgumentError } from '../../core/errors.js';
import type { TensorLike } from '../../core/types.js';
import type { PeerBatch, PeerCall } from '../../engine/wire/peer_request.js';
import type { CallContext, Prepared } from '../call.js';
import type { Completion } from '../engine_client.js';
import type { ParsedTensor } from '../tensor_args.js';
import {
  kRecvOptions,
  kSendOptions,
  parseRecv,
  parseSend,
  type Received,
  type RecvOptions,
  receivedAs,
  type SendOptions,
} from './point_to_point.js';

/** A send of a batch: `tensor` to rank `to`, with the options of {@link RingReduce.send}. */
export type BatchSend = { op: 'send'; tensor: TensorLike } & SendOptions;
/** A recv of a batch: into `into` from rank `from` (or `'any'`), with the options of {@link RingReduce.recv}. */
export type BatchRecv<T extends TensorLike = TensorLike> = { op: 'recv'; into: T } & RecvOptions;
/** One entry of {@link RingReduce.batchSendRecv}'s list (torch's P2POp). */
export type BatchOp = BatchSend | BatchRecv;

/** What an entry resolves to: undefined for a send, `into` for a recv, `{ data: into, from }` for a recv from `'any'`. */
export type BatchResult<O> = O extends { op: 'send' }
  ? undefined
  : O extends { op: 'recv'; into: infer T extends TensorLike }
    ? O extends { from: 'any' }
      ? Received<T>
      : O extends { from: number }
        ? T
        : T | Received<T>
    : never;

/** The results of a batch, in the order of its entries. */
export type BatchResults<Ops extends readonly BatchOp[]> = { -readonly [K in keyof Ops]: BatchResult<Ops[K]> };

interface Entry {
  call: PeerCall;
  t: ParsedTensor;
  ctx: CallContext;
  into?: unknown;
}

/**
 * Prepares the batch `ops`; each entry's option 'processSet' picks its context (`contextOf`).
 * A refused entry is named: `batchSendRecv ops[2]: option 'to' must be ...`.
 */
export function prepareBatchSendRecv(
  world: CallContext,
  ops: unknown,
  contextOf: (processSet: unknown) => CallContext,
): Prepared {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw new InvalidArgumentError(
      `batchSendRecv needs a non-empty array of { op: 'send', tensor, to } and { op: 'recv', into, from } entries, got ${
        Array.isArray(ops) ? 'an empty array' : String(ops)
      }`,
    );
  }
  const entries = ops.map((op, i) => {
    try {
      return parseEntry(op, contextOf);
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      throw new InvalidArgumentError(`batchSendRecv ops[${i}]: ${error.message}`);
    }
  });
  let bytes = 0;
  for (const { call } of entries) {
    call.offset = bytes;
    bytes += Math.ceil((call.length * bytesPerElement(call.dtype)) / 8) * 8;
  }
  const staging = world.staging.acquire(bytes);
  // Sends are copied now: the caller may reuse its tensors as soon as the call returns.
  for (const { call, t } of entries)
    if (call.op === 'send') viewOf(t.dtype, staging, call.offset, call.length).set(t.data as never);
  const name = world.nameFor('batchSendRecv', undefined, 'batchSendRecv');
  for (const [i, { call }] of entries.entries()) call.name = `${name}/${i}`;
  const request: PeerBatch = { op: 'batchSendRecv', name, calls: entries.map((e) => e.call) };
  return {
    request,
    buffer: new Uint8Array(staging, 0, bytes),
    staging,
    finish: (completion: Completion) =>
      entries.map(({ call, t, ctx, into }, i) => {
        if (call.op === 'send') return undefined;
        t.data.set(viewOf(t.dtype, staging, call.offset, call.length) as never);
        return receivedAs(ctx, call, into, completion.counts?.[i]);
      }),
  };
}

function parseEntry(op: unknown, contextOf: (processSet: unknown) => CallContext): Entry {
  if (typeof op !== 'object' || op === null || !('op' in op) || (op.op !== 'send' && op.op !== 'recv')) {
    throw new InvalidArgumentError(
      `an entry must be { op: 'send', tensor, to, ... } or { op: 'recv', into, from, ... }, got ${describeEntry(op)}`,
    );
  }
  if (op.op === 'send') {
    const { op: _, tensor, ...options } = op as { op: 'send'; tensor?: unknown };
    checkKeys(options, ['tensor', ...kSendOptions]);
    const ctx = contextOf((options as { processSet?: unknown }).processSet);
    return { ...parseSend(ctx, tensor, options), ctx };
  }
  const { op: _, into, ...options } = op as { op: 'recv'; into?: unknown };
  checkKeys(options, ['into', ...kRecvOptions]);
  const ctx = contextOf((options as { processSet?: unknown }).processSet);
  return { ...parseRecv(ctx, into, options), ctx, into };
}

/** An entry's unknown key, named with every key its op takes. */
function checkKeys(options: object, allowed: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) throw new InvalidArgumentError(`unknown key '${key}' (allowed: op, ${allowed.join(', ')})`);
  }
}

function describeEntry(op: unknown): string {
  if (typeof op !== 'object' || op === null) return String(op);
  return 'op' in op ? `op ${JSON.stringify(op.op)}` : `an object without 'op'`;
}
