/**
 * Binary codec of the control messages (see messages.ts).
 *
 * Layout: one byte of message type, then the body. A response starts with its kind (0 execute,
 * 1 error, 2 a list of u32 cache ids, 3 the ranks that have joined); a response list ends with a
 * flag byte and, when it is 1, autotune's settings change; a ready report is its round and a bit-vector of cache ids
 * (bit i of byte i >> 3 is id i), so a hundred ready tensors cost 13 bytes, then the eager
 * buffers (id and bytes) and the withheld ones (a bit-vector); a ready step (ready_doubling.ts)
 * is its round, step, urgent flag and bit-vector and rank 0's decision count, then the
 * contributions it carries (rank and bit-vector) and the eager buffers (origin rank, id and
 * bytes) and withheld ones (origin rank and bit-vector). A request is its name, operation, dtype and shape, then the fields its
 * operation's spec adds (ops/); an execute response carries the ruling request and the per-rank
 * counts. The primitives, and the decoder's bounds checks, are in wire.ts.
 */

import { kCollectiveOps } from '../../core/collective_ops.js';
import { kWireDTypes } from '../../core/dtypes.js';
import { kErrorClassNames } from '../../core/errors.js';
import type { RequestBase } from '../ops/op_spec.js';
import { specOf } from '../ops/registry.js';
import { type ControlMessage, kPeerOutcomes, type Request, type WireResponse } from './messages.js';
import { codeOf, Reader, readCounts, readShape, Writer, writeCounts, writeShape } from './wire.js';

/** Message types in wire order: append only. */
const kTypes = [
  'requests',
  'responses',
  'ready',
  'shutdown',
  'shutdown-ack',
  'p2p-offer',
  'p2p-answer',
  'p2p-withdraw',
  'ready-step',
] as const;

/** Types that belong to a process set: each carries the set's id (a p2p message's: the set it is matched in). */
function ofSet(type: ControlMessage['type']): boolean {
  return (
    type === 'requests' ||
    type === 'responses' ||
    type === 'ready' ||
    type === 'ready-step' ||
    type === 'p2p-offer' ||
    type === 'p2p-withdraw'
  );
}

function writeRequest(w: Writer, r: Request): void {
  w.str(r.name);
  w.u8(codeOf(kCollectiveOps, r.op));
  w.u8(codeOf(kWireDTypes, r.dtype));
  writeShape(w, r.shape);
  // A group: its name ('' for none), size and this member's index.
  w.str(r.group?.name ?? '');
  if (r.group) {
    w.u32(r.group.size);
    w.u32(r.group.index);
  }
  // 0: none (a deadline is at least 1 ms).
  w.u32(r.timeoutMs ?? 0);
  specOf(r).write(w, r);
}

function readRequest(r: Reader): Request {
  const name = r.str('tensor name');
  const op = r.enumOf(kCollectiveOps, 'op');
  const dtype = r.enumOf(kWireDTypes, 'dtype');
  const shape = readShape(r, 'shape');
  const groupName = r.str('group name');
  const base: RequestBase = { name, op, dtype, shape };
  if (groupName !== '') {
    const size = r.u32('group size');
    const index = r.u32('group index');
    if (index >= size) r.fail(`member ${index} of a group of ${size}`);
    base.group = { name: groupName, size, index };
  }
  const timeoutMs = r.u32('timeout');
  if (timeoutMs > 0) base.timeoutMs = timeoutMs;
  return specOf(base as Request).read(r, base as never);
}

function writeResponse(w: Writer, r: WireResponse): void {
  if (r.kind === 'cached') {
    w.u8(2);
    w.u32(r.ids.length);
    for (const id of r.ids) w.u32(id);
    return;
  }
  if (r.kind === 'joined') {
    w.u8(3);
    writeCounts(w, r.ranks);
    return;
  }
  w.u8(r.kind === 'execute' ? 0 : 1);
  w.u32(r.names.length);
  for (const n of r.names) w.str(n);
  if (r.kind === 'execute') {
    writeRequest(w, r.request);
    writeCounts(w, r.counts);
    writeCounts(w, r.joined ?? []);
  } else {
    w.u8(codeOf(kErrorClassNames, r.errorKind));
    w.str(r.message);
    // 0 ranks means every rank: a stall always has at least one rank that submitted.
    w.u32(r.ranks?.length ?? 0);
    for (const rank of r.ranks ?? []) w.u32(rank);
  }
}

function readResponse(r: Reader): WireResponse {
  const kind = r.u8('response kind');
  if (kind > 3) r.fail(`unknown response kind ${kind}`);
  if (kind === 3) return { kind: 'joined', names: [], ranks: readCounts(r, 'joined ranks') };
  if (kind === 2) {
    const n = r.count('cache ids', 4);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(r.u32('cache id'));
    return { kind: 'cached', ids };
  }
  const count = r.count('names', 4);
  const names: string[] = [];
  for (let i = 0; i < count; i++) names.push(r.str('tensor name'));
  if (kind === 1) {
    const errorKind = r.enumOf(kErrorClassNames, 'error kind');
    const message = r.str('error message');
    const n = r.count('error ranks', 4);
    if (n === 0) return { kind: 'error', names, errorKind, message };
    const ranks: number[] = [];
    for (let i = 0; i < n; i++) ranks.push(r.u32('error rank'));
    return { kind: 'error', names, errorKind, message, ranks };
  }
  const request = readRequest(r);
  const counts = readCounts(r, 'per-rank counts');
  const joined = readCounts(r, 'joined ranks');
  return joined.length > 0 ? { kind: 'execute', names, request, counts, joined } : { kind: 'execute', names, request, counts };
}

/**
 * Eager entries (eager_exchange.ts): those with data one by one (with their rank when
 * `ranked`), then the withheld ones (empty data) as a bit-vector of ids per rank, since a
 * withheld burst names many ids: a u32 count of (rank when `ranked`, bit-vector) groups.
 */
function writeEager(w: Writer, eager: readonly { rank?: number; id: number; data: Uint8Array }[], ranked: boolean): void {
  // Built only when something is withheld: a report is written on every call.
  let withheld: Map<number, number[]> | undefined;
  let sent = 0;
  for (const e of eager) {
    if (e.data.byteLength > 0) sent++;
    else {
      withheld ??= new Map();
      const rank = e.rank ?? 0;
      const ids = withheld.get(rank);
      if (ids) ids.push(e.id);
      else withheld.set(rank, [e.id]);
    }
  }
  w.u32(sent);
  for (const { rank, id, data } of eager) {
    if (data.byteLength === 0) continue;
    if (ranked) w.u32(rank ?? 0);
    w.u32(id);
    w.bytesOf(data);
  }
  w.u32(withheld?.size ?? 0);
  for (const [rank, ids] of withheld ?? []) {
    if (ranked) w.u32(rank);
    w.bitVector(ids);
  }
}

const kNoData = new Uint8Array(0);

/** The eager entries writeEager wrote; `entry` makes each (with its origin rank when `ranked`). */
function readEager<E>(r: Reader, ranked: boolean, entry: (rank: number, id: number, data: Uint8Array) => E): E[] {
  const eager: E[] = [];
  const n = r.count('eager buffers', ranked ? 12 : 8);
  for (let i = 0; i < n; i++) {
    const rank = ranked ? r.u32('eager rank') : 0;
    eager.push(entry(rank, r.u32('eager id'), r.bytesOf('eager buffer')));
  }
  const groups = r.count('withheld eager groups', ranked ? 8 : 4);
  for (let i = 0; i < groups; i++) {
    const rank = ranked ? r.u32('withheld rank') : 0;
    for (const id of idsOf(r.bytesOf('withheld bit-vector'))) eager.push(entry(rank, id, kNoData));
  }
  return eager;
}

/** One writer for every message: encoding never re-enters, and finish() copies the bytes out. */
const kWriter = new Writer();

/** The encoded `message`, in a fresh array or in `alloc`'s (of the message's length). */
export function encodeControl(message: ControlMessage, alloc?: (length: number) => Uint8Array): Uint8Array {
  const w = kWriter;
  w.reset();
  w.u8(codeOf(kTypes, message.type));
  if (ofSet(message.type)) w.u32((message as { set?: number }).set ?? 0);
  if (message.type === 'requests') {
    w.u32(message.requests.length);
    for (const r of message.requests) writeRequest(w, r);
  } else if (message.type === 'responses') {
    w.u32(message.afterRounds);
    w.u32(message.evict.length);
    for (const id of message.evict) w.u32(id);
    w.u32(message.responses.length);
    for (const r of message.responses) writeResponse(w, r);
    const change = message.settings;
    w.u8(change ? 1 : 0);
    if (change) {
      w.f64(change.fusionThresholdBytes);
      w.f64(change.burstHoldMs);
      w.u32(change.trial);
      w.u8(change.done ? 1 : 0);
      w.f64(change.score);
    }
  } else if (message.type === 'p2p-offer') {
    w.u32(message.tag);
    w.u32(message.sequence);
    w.u8(codeOf(kWireDTypes, message.dtype));
    w.f64(message.length);
  } else if (message.type === 'p2p-answer') {
    w.u32(message.sequence);
    w.u8(codeOf(kPeerOutcomes, message.outcome));
    w.str(message.message);
  } else if (message.type === 'p2p-withdraw') {
    w.u32(message.sequence);
    w.u32(message.tag);
  } else if (message.type === 'ready') {
    w.u32(message.round);
    w.bitVector(message.ids);
    writeEager(w, message.eager, false);
  } else if (message.type === 'ready-step') {
    w.u32(message.round);
    w.u8(message.step);
    w.u8(message.urgent ? 1 : 0);
    w.bitVector(message.ids);
    w.u32(message.decisions);
    w.u32(message.contributions.length);
    for (const { rank, ids } of message.contributions) {
      w.u32(rank);
      w.bitVector(ids);
    }
    writeEager(w, message.eager, true);
  }
  return w.finish(alloc);
}

/**
 * `message` (decoded from `bytes`) with its own copies of the eager buffers, which decoding left
 * as views of the payload: for a message kept after its payload's handler returned (the
 * transport may reuse a payload's bytes for the next message).
 */
export function detachControl<M extends object>(message: M): M {
  const eager = (message as { eager?: readonly { data: Uint8Array }[] }).eager;
  if (eager === undefined || eager.length === 0) return message;
  return { ...message, eager: eager.map((e) => ({ ...e, data: e.data.slice() })) };
}

export function decodeControl(bytes: Uint8Array): ControlMessage {
  const r = new Reader(bytes);
  const type = r.enumOf(kTypes, 'message type');
  let message: ControlMessage;
  const set = ofSet(type) ? r.u32('process set') : 0;
  if (type === 'requests') {
    const n = r.count('requests', 11);
    const requests: Request[] = [];
    for (let i = 0; i < n; i++) requests.push(readRequest(r));
    message = { type, requests };
  } else if (type === 'responses') {
    const afterRounds = r.u32('round count');
    const evicted = r.count('evicted ids', 4);
    const evict: number[] = [];
    for (let i = 0; i < evicted; i++) evict.push(r.u32('evicted id'));
    const n = r.count('responses', 5);
    const responses: WireResponse[] = [];
    for (let i = 0; i < n; i++) responses.push(readResponse(r));
    message = { type, afterRounds, evict, responses };
    if (r.u8('settings flag') === 1) {
      message.settings = {
        fusionThresholdBytes: r.dim('fusion threshold'),
        burstHoldMs: r.dim('burst hold'),
        trial: r.u32('trial'),
        done: r.u8('done flag') === 1,
        score: r.f64('score'),
      };
    }
  } else if (type === 'p2p-offer') {
    const tag = r.u32('tag');
    const sequence = r.u32('sequence');
    const dtype = r.enumOf(kWireDTypes, 'dtype');
    const length = r.dim('length');
    message = { type, tag, sequence, dtype, length };
  } else if (type === 'p2p-answer') {
    const sequence = r.u32('sequence');
    const outcome = r.enumOf(kPeerOutcomes, 'outcome');
    message = { type, sequence, outcome, message: r.str('message') };
  } else if (type === 'p2p-withdraw') {
    message = { type, sequence: r.u32('sequence'), tag: r.u32('tag') };
  } else if (type === 'ready') {
    const round = r.u32('round');
    const ids = idsOf(r.bytesOf('ready bit-vector'));
    const eager = readEager(r, false, (_rank, id, data) => ({ id, data }));
    message = { type, round, ids, eager };
  } else if (type === 'ready-step') {
    const round = r.u32('round');
    const step = r.u8('step');
    const urgent = r.u8('urgent flag') !== 0;
    const ids = idsOf(r.bytesOf('ready bit-vector'));
    const decisions = r.u32('decision count');
    const contributions: { rank: number; ids: number[] }[] = [];
    const n = r.count('contributions', 8);
    for (let i = 0; i < n; i++) contributions.push({ rank: r.u32('contributing rank'), ids: idsOf(r.bytesOf('contribution')) });
    const eager = readEager(r, true, (rank, id, data) => ({ rank, id, data }));
    message = { type, round, step, urgent, ids, decisions, contributions, eager };
  } else {
    message = { type };
  }
  r.end();
  // The world is the default: a message of set 0 decodes as one without a set.
  if (set !== 0) (message as { set?: number }).set = set;
  return message;
}

/** The ids set in a bit-vector, ascending. */
function idsOf(bits: Uint8Array): number[] {
  const ids: number[] = [];
  for (let byte = 0; byte < bits.length; byte++) {
    const b = bits[byte] as number;
    if (b === 0) continue;
    for (let bit = 0; bit < 8; bit++) if (b & (1 << bit)) ids.push(byte * 8 + bit);
  }
  return ids;
}
