/**
 * Point-to-point send and recv between two ranks, without rank 0: messages are matched by
 * (sender, receiver, process set, tag) in the order each side made its calls, as MPI's are.
 *
 * How it works: a send offers its message to the receiver with a control message (its process
 * set and user tag, a sequence number per ordered pair of ranks, the dtype and length). The
 * receiver matches offers with its recvs of the same set and tag, each recv with the first offer
 * of its sender (or of any sender, for a recv from kAnyPeer), each offer with the first recv that
 * takes its sender; both lists are in order (offers as they arrived, recvs as they were posted).
 * On a match it checks dtype and length: if they agree it posts the data receive and accepts, and
 * the sender then sends the data under a data tag of its own (tags.ts: odd tags, from the
 * sequence number, so a message can never land in another's receive); if not, it refuses with a
 * MismatchError message that both sides reject with. The data crosses the wire once, straight
 * into the receiver's buffer; the price is the offer and its answer, one round trip of control
 * messages.
 *
 * A batch (batchSendRecv) is one submission whose sends and recvs all start at once, in list
 * order, over views of its one buffer; it settles when every call has, with the first error in
 * list order, so rings and exchanges of blocking calls cannot deadlock.
 *
 * Deadlines: a recv nobody sends to fails after its own timeout (option 'timeoutMs'), or else the
 * stall timeout, with a TimeoutError naming the peer and the tag (0: it waits for as long as the
 * job lives). A send whose offer nobody has
 * accepted by then asks the receiver to withdraw it, and the receiver decides: an offer not yet
 * matched is withdrawn (the send fails with the TimeoutError), one already accepted goes ahead (the
 * accept is on its way). The receiver is the one place where matching happens, so a recv never
 * takes an offer its sender has given up. A broken link fails everything pending with that peer
 * (the engine's failAll), which bounds the sender's wait for the answer.
 */
import { viewOf } from '../../core/dtypes.js';
import { MismatchError, type RingReduceError, TimeoutError, toErrorRecord } from '../../core/errors.js';
import type { TypedArray } from '../../core/types.js';
import { bytesOf, type Transport } from '../../transport/transport.js';
import type { ControlMessage } from '../wire/messages.js';
import { kAnyPeer, type PeerBatch, type PeerCall, type PeerRequest } from '../wire/peer_request.js';

export type { PeerRequest } from '../wire/peer_request.js';

import type { FromEngine } from '../threads/worker_protocol.js';
import { peerTag } from '../wire/tags.js';

export function isPeerRequest(request: { op: string }): request is PeerRequest {
  return request.op === 'send' || request.op === 'recv' || request.op === 'batchSendRecv';
}

export type PeerOffer = ControlMessage & { type: 'p2p-offer' };
export type PeerAnswer = ControlMessage & { type: 'p2p-answer' };

/** How a call ends: an error, or undefined and (a recv) the job rank it took its message from. */
type Settle = (error: unknown, sender?: number) => void;

interface PendingCall {
  request: PeerCall;
  buffer: TypedArray;
  timer: NodeJS.Timeout | undefined;
  settle: Settle;
}

/** An offer not yet matched, with its sender. */
interface HeldOffer {
  peer: number;
  offer: PeerOffer;
}

export interface PointToPointSettings {
  rank: number;
  /** How long an unmatched send or recv waits; 0: no limit. */
  timeoutMs: number;
}

export interface PointToPointHooks {
  sendControl(peer: number, message: ControlMessage): void;
  post(message: FromEngine): void;
  fail(error: unknown): void;
  /** The job ranks of process set `set` (0: the world), for messages that name ranks as the caller numbers them. */
  members(set: number): readonly number[] | undefined;
}

export class PointToPoint {
  /** Next sequence number of a send to each peer. */
  private readonly nextSequence = new Map<number, number>();
  /** Sends offered and not yet answered, by `${peer}/${sequence}`. */
  private readonly sends = new Map<string, PendingCall>();
  /** Per `${set}/${tag}`: offers not yet matched, in arrival order, and recvs not yet matched, in posting order. */
  private readonly offers = new Map<string, HeldOffer[]>();
  private readonly recvs = new Map<string, PendingCall[]>();
  /** Recvs that accepted an offer, by `${peer}/${sequence}`, waiting for the data. */
  private readonly accepted = new Map<string, PendingCall>();

  constructor(
    private readonly settings: PointToPointSettings,
    private readonly transport: Transport,
    private readonly hooks: PointToPointHooks,
  ) {}

  /**
   * Starts call `id`. A recv's completion's `counts` hold the job rank it took its message from;
   * a batch's, that per call in order (-1 for a send).
   */
  submit(id: number, request: PeerRequest, buffer: TypedArray): void {
    if (request.op === 'batchSendRecv') {
      this.batch(id, request, buffer);
      return;
    }
    this.start(request, buffer, (error, sender) => {
      if (error !== undefined) this.fail(id, error);
      else this.hooks.post(sender === undefined ? { type: 'done', id } : { type: 'done', id, counts: [sender] });
    });
  }

  /** A peer's offer of a message to this rank. */
  onOffer(peer: number, offer: PeerOffer): void {
    const key = keyOf(offer.set ?? 0, offer.tag);
    const recv = take(this.recvs, key, (r) => r.request.peer === peer || r.request.peer === kAnyPeer);
    if (recv) this.match(peer, recv, offer);
    else push(this.offers, key, { peer, offer });
  }

  /** The receiver's answer to one of this rank's offers. */
  onAnswer(peer: number, answer: PeerAnswer): void {
    const key = `${peer}/${answer.sequence}`;
    const send = this.sends.get(key);
    if (!send) return;
    this.sends.delete(key);
    clearTimeout(send.timer);
    if (answer.outcome === 'mismatch') {
      send.settle(new MismatchError(answer.message));
      return;
    }
    if (answer.outcome === 'withdrawn') {
      const { request } = send;
      send.settle(
        new TimeoutError(
          `${this.describe(request)}: ${this.rankName(request)} posted no matching recv within ${this.timeoutOf(request)} ms`,
        ),
      );
      return;
    }
    this.transport.send(peer, peerTag(answer.sequence), bytesOf(send.buffer)).then(
      () => send.settle(undefined),
      (error) => {
        send.settle(error);
        this.hooks.fail(error);
      },
    );
  }

  /** The sender's deadline passed: withdraw its offer unless a recv has taken it (then the accept answers). */
  onWithdraw(peer: number, sequence: number, tag: number, set = 0): void {
    const held = take(this.offers, keyOf(set, tag), (o) => o.peer === peer && o.offer.sequence === sequence);
    if (held) this.hooks.sendControl(peer, { type: 'p2p-answer', sequence, outcome: 'withdrawn', message: '' });
  }

  /** Calls pending (unmatched or in flight), for the engine's activity. */
  get pending(): number {
    let n = this.sends.size + this.accepted.size;
    for (const recvs of this.recvs.values()) n += recvs.length;
    return n;
  }

  /** Fails every pending call with `error` (the job broke or is shutting down). */
  failAll(error: RingReduceError): void {
    const all: PendingCall[] = [...this.sends.values(), ...this.accepted.values()];
    for (const recvs of this.recvs.values()) all.push(...recvs);
    this.sends.clear();
    this.accepted.clear();
    this.recvs.clear();
    this.offers.clear();
    for (const call of all) {
      clearTimeout(call.timer);
      call.settle(error);
    }
  }

  /** Starts every call of the batch at once; settles it when the last has settled. */
  private batch(id: number, batch: PeerBatch, buffer: TypedArray): void {
    const { calls } = batch;
    const senders = new Array<number>(calls.length).fill(-1);
    const errors = new Array<unknown>(calls.length);
    let left = calls.length;
    const settled = () => {
      if (--left > 0) return;
      const first = errors.findIndex((e) => e !== undefined);
      if (first >= 0) this.fail(id, errors[first]);
      else this.hooks.post({ type: 'done', id, counts: senders });
    };
    if (left === 0) {
      left = 1;
      settled();
      return;
    }
    for (const [i, call] of calls.entries()) {
      const view = viewOf(call.dtype, buffer.buffer, buffer.byteOffset + (call.offset ?? 0), call.length);
      this.start(call, view, (error, sender) => {
        if (error !== undefined) errors[i] = error;
        else if (sender !== undefined) senders[i] = sender;
        settled();
      });
    }
  }

  private start(request: PeerCall, buffer: TypedArray, settle: Settle): void {
    if (request.op === 'send') this.send(request, buffer, settle);
    else this.recv(request, buffer, settle);
  }

  private send(request: PeerCall, buffer: TypedArray, settle: Settle): void {
    const sequence = this.nextSequence.get(request.peer) ?? 0;
    this.nextSequence.set(request.peer, (sequence + 1) % 2 ** 31);
    const key = `${request.peer}/${sequence}`;
    const set = request.set ?? 0;
    const pending: PendingCall = { request, buffer, timer: undefined, settle };
    pending.timer = this.deadline(request, () => {
      this.hooks.sendControl(request.peer, { type: 'p2p-withdraw', ...(set ? { set } : {}), sequence, tag: request.tag });
    });
    this.sends.set(key, pending);
    this.hooks.sendControl(request.peer, {
      type: 'p2p-offer',
      ...(set ? { set } : {}),
      tag: request.tag,
      sequence,
      dtype: request.dtype,
      length: request.length,
    });
  }

  private recv(request: PeerCall, buffer: TypedArray, settle: Settle): void {
    const key = keyOf(request.set ?? 0, request.tag);
    const pending: PendingCall = { request, buffer, timer: undefined, settle };
    const held = take(this.offers, key, (o) => request.peer === kAnyPeer || o.peer === request.peer);
    if (held) {
      this.match(held.peer, pending, held.offer);
      return;
    }
    pending.timer = this.deadline(request, () => {
      take(this.recvs, key, (r) => r === pending);
      const what = request.peer === kAnyPeer ? 'no rank sent a message' : `${this.rankName(request)} sent nothing`;
      settle(new TimeoutError(`${this.describe(request)}: ${what} within ${this.timeoutOf(request)} ms`));
    });
    push(this.recvs, key, pending);
  }

  private match(peer: number, recv: PendingCall, offer: PeerOffer): void {
    clearTimeout(recv.timer);
    const { request } = recv;
    if (offer.dtype !== request.dtype || offer.length !== request.length) {
      const set = request.set ?? 0;
      const [from, to] = [this.rankIn(set, peer), this.rankIn(set, this.settings.rank)];
      const message =
        `Mismatched send/recv from rank ${from} to rank ${to}${setSuffix(set)} (tag ${request.tag}): ` +
        `rank ${from} sends ${offer.length} ${offer.dtype}, rank ${to} expects ${request.length} ${request.dtype}.`;
      this.hooks.sendControl(peer, { type: 'p2p-answer', sequence: offer.sequence, outcome: 'mismatch', message });
      recv.settle(new MismatchError(message));
      return;
    }
    const key = `${peer}/${offer.sequence}`;
    this.accepted.set(key, recv);
    this.transport.recv(peer, peerTag(offer.sequence), bytesOf(recv.buffer)).then(
      () => {
        // Gone: failed with the job before the data came.
        if (this.accepted.get(key) !== recv) return;
        this.accepted.delete(key);
        recv.settle(undefined, peer);
      },
      (error) => {
        if (this.accepted.get(key) !== recv) return;
        this.accepted.delete(key);
        recv.settle(error);
      },
    );
    this.hooks.sendControl(peer, { type: 'p2p-answer', sequence: offer.sequence, outcome: 'accepted', message: '' });
  }

  /** The call's own timeout, or the job's. */
  private timeoutOf(request: PeerCall): number {
    return request.timeoutMs ?? this.settings.timeoutMs;
  }

  private deadline(request: PeerCall, expire: () => void): NodeJS.Timeout | undefined {
    const ms = this.timeoutOf(request);
    return ms > 0 ? setTimeout(expire, ms) : undefined;
  }

  private fail(id: number, error: unknown): void {
    this.hooks.post({ type: 'failed', id, error: toErrorRecord(error) });
  }

  /** Job rank `rank` as the caller numbers it: its rank in the set (the world: itself). */
  private rankIn(set: number, rank: number): number {
    if (set === 0) return rank;
    const at = this.hooks.members(set)?.indexOf(rank) ?? -1;
    return at >= 0 ? at : rank;
  }

  /** 'rank 2' (of the set): the call's peer. */
  private rankName(request: PeerCall): string {
    return `rank ${this.rankIn(request.set ?? 0, request.peer)}`;
  }

  private describe(request: PeerCall): string {
    const set = request.set ?? 0;
    const what = `${request.length} ${request.dtype}`;
    if (request.op === 'send') return `send of ${what} to ${this.rankName(request)}${setSuffix(set)} (tag ${request.tag})`;
    const from = request.peer === kAnyPeer ? 'any rank' : this.rankName(request);
    return `recv of ${what} from ${from}${setSuffix(set)} (tag ${request.tag})`;
  }
}

function keyOf(set: number, tag: number): string {
  return `${set}/${tag}`;
}

function setSuffix(set: number): string {
  return set === 0 ? '' : ` of process set ${set}`;
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Removes and returns the first entry of `map[key]` that `fits`; an emptied list goes. */
function take<T>(map: Map<string, T[]>, key: string, fits: (value: T) => boolean): T | undefined {
  const list = map.get(key);
  const at = list?.findIndex(fits) ?? -1;
  if (!list || at < 0) return undefined;
  const [value] = list.splice(at, 1);
  if (list.length === 0) map.delete(key);
  return value;
}
