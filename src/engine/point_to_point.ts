/**
 * Point-to-point send and recv between two ranks, without rank 0: messages are matched by
 * (sender, receiver, tag) in the order each side made its calls, as MPI's are.
 *
 * How it works: a send offers its message to the receiver with a control message (its user tag, a
 * sequence number per ordered pair of ranks, the dtype and length). The receiver matches offers
 * with its recvs of the same sender and tag, first with first. On a match it checks dtype and
 * length: if they agree it posts the data receive and accepts, and the sender then sends the data
 * under a data tag of its own (tags.ts: odd tags, from the sequence number, so a message can
 * never land in another's receive); if not, it refuses with a MismatchError message that both
 * sides reject with. The data crosses the wire once, straight into the receiver's buffer; the
 * price is the offer and its answer, one round trip of control messages.
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
import { MismatchError, type RingReduceError, TimeoutError, toErrorRecord } from '../core/errors.js';
import type { TypedArray } from '../core/types.js';
import { bytesOf, type Transport } from '../transport/transport.js';
import type { ControlMessage } from './messages.js';
import type { PeerRequest } from './peer_request.js';

export type { PeerRequest } from './peer_request.js';

import { peerTag } from './tags.js';
import type { FromEngine } from './worker_protocol.js';

export function isPeerRequest(request: { op: string }): request is PeerRequest {
  return request.op === 'send' || request.op === 'recv';
}

export type PeerOffer = ControlMessage & { type: 'p2p-offer' };
export type PeerAnswer = ControlMessage & { type: 'p2p-answer' };

interface PendingSend {
  id: number;
  request: PeerRequest;
  buffer: TypedArray;
  timer: NodeJS.Timeout | undefined;
}

interface PendingRecv {
  id: number;
  request: PeerRequest;
  buffer: TypedArray;
  timer: NodeJS.Timeout | undefined;
  /** The sequence number of the offer it accepted: its data is on the way. */
  accepted?: number;
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
}

export class PointToPoint {
  /** Next sequence number of a send to each peer. */
  private readonly nextSequence = new Map<number, number>();
  /** Sends offered and not yet answered, by `${peer}/${sequence}`. */
  private readonly sends = new Map<string, PendingSend>();
  /** Per `${peer}/${tag}`: offers not yet matched and recvs not yet matched, each in arrival order. */
  private readonly offers = new Map<string, PeerOffer[]>();
  private readonly recvs = new Map<string, PendingRecv[]>();
  /** Recvs that accepted an offer, by `${peer}/${sequence}`, waiting for the data. */
  private readonly accepted = new Map<string, PendingRecv>();

  constructor(
    private readonly settings: PointToPointSettings,
    private readonly transport: Transport,
    private readonly hooks: PointToPointHooks,
  ) {}

  submit(id: number, request: PeerRequest, buffer: TypedArray): void {
    if (request.op === 'send') this.send(id, request, buffer);
    else this.recv(id, request, buffer);
  }

  /** A peer's offer of a message to this rank. */
  onOffer(peer: number, offer: PeerOffer): void {
    const key = `${peer}/${offer.tag}`;
    const recv = this.recvs.get(key)?.shift();
    if (recv) this.match(peer, recv, offer);
    else push(this.offers, key, offer);
  }

  /** The receiver's answer to one of this rank's offers. */
  onAnswer(peer: number, answer: PeerAnswer): void {
    const key = `${peer}/${answer.sequence}`;
    const send = this.sends.get(key);
    if (!send) return;
    this.sends.delete(key);
    clearTimeout(send.timer);
    if (answer.outcome === 'mismatch') {
      this.settle(send.id, new MismatchError(answer.message));
      return;
    }
    if (answer.outcome === 'withdrawn') {
      const { request } = send;
      this.settle(
        send.id,
        new TimeoutError(
          `${describe(request)}: rank ${request.peer} posted no matching recv within ${this.timeoutOf(request)} ms`,
        ),
      );
      return;
    }
    this.transport.send(peer, peerTag(answer.sequence), bytesOf(send.buffer)).then(
      () => this.hooks.post({ type: 'done', id: send.id }),
      (error) => {
        this.settle(send.id, error);
        this.hooks.fail(error);
      },
    );
  }

  /** The sender's deadline passed: withdraw its offer unless a recv has taken it (then the accept answers). */
  onWithdraw(peer: number, sequence: number, tag: number): void {
    const offers = this.offers.get(`${peer}/${tag}`);
    const at = offers?.findIndex((o) => o.sequence === sequence) ?? -1;
    if (!offers || at < 0) return;
    offers.splice(at, 1);
    this.hooks.sendControl(peer, { type: 'p2p-answer', sequence, outcome: 'withdrawn', message: '' });
  }

  /** Calls pending (unmatched or in flight), for the engine's activity. */
  get pending(): number {
    let n = this.sends.size + this.accepted.size;
    for (const recvs of this.recvs.values()) n += recvs.length;
    return n;
  }

  /** Fails every pending call with `error` (the job broke or is shutting down). */
  failAll(error: RingReduceError): void {
    const all: { id: number; timer: NodeJS.Timeout | undefined }[] = [...this.sends.values(), ...this.accepted.values()];
    for (const recvs of this.recvs.values()) all.push(...recvs);
    this.sends.clear();
    this.accepted.clear();
    this.recvs.clear();
    this.offers.clear();
    for (const call of all) {
      clearTimeout(call.timer);
      this.settle(call.id, error);
    }
  }

  private send(id: number, request: PeerRequest, buffer: TypedArray): void {
    const sequence = this.nextSequence.get(request.peer) ?? 0;
    this.nextSequence.set(request.peer, (sequence + 1) % 2 ** 31);
    const key = `${request.peer}/${sequence}`;
    const pending: PendingSend = { id, request, buffer, timer: undefined };
    pending.timer = this.deadline(request, () => {
      this.hooks.sendControl(request.peer, { type: 'p2p-withdraw', sequence, tag: request.tag });
    });
    this.sends.set(key, pending);
    this.hooks.sendControl(request.peer, {
      type: 'p2p-offer',
      tag: request.tag,
      sequence,
      dtype: request.dtype,
      length: request.length,
    });
  }

  private recv(id: number, request: PeerRequest, buffer: TypedArray): void {
    const key = `${request.peer}/${request.tag}`;
    const offer = this.offers.get(key)?.shift();
    const pending: PendingRecv = { id, request, buffer, timer: undefined };
    if (offer) {
      this.match(request.peer, pending, offer);
      return;
    }
    pending.timer = this.deadline(request, () => {
      const recvs = this.recvs.get(key);
      recvs?.splice(recvs.indexOf(pending), 1);
      this.settle(
        id,
        new TimeoutError(`${describe(request)}: rank ${request.peer} sent nothing within ${this.timeoutOf(request)} ms`),
      );
    });
    push(this.recvs, key, pending);
  }

  private match(peer: number, recv: PendingRecv, offer: PeerOffer): void {
    clearTimeout(recv.timer);
    const { request } = recv;
    if (offer.dtype !== request.dtype || offer.length !== request.length) {
      const message =
        `Mismatched send/recv from rank ${peer} to rank ${this.settings.rank} (tag ${request.tag}): ` +
        `rank ${peer} sends ${offer.length} ${offer.dtype}, rank ${this.settings.rank} expects ${request.length} ${request.dtype}.`;
      this.hooks.sendControl(peer, { type: 'p2p-answer', sequence: offer.sequence, outcome: 'mismatch', message });
      this.settle(recv.id, new MismatchError(message));
      return;
    }
    const key = `${peer}/${offer.sequence}`;
    recv.accepted = offer.sequence;
    this.accepted.set(key, recv);
    this.transport.recv(peer, peerTag(offer.sequence), bytesOf(recv.buffer)).then(
      () => {
        // Gone: failed with the job before the data came.
        if (this.accepted.get(key) !== recv) return;
        this.accepted.delete(key);
        this.hooks.post({ type: 'done', id: recv.id });
      },
      (error) => {
        if (this.accepted.get(key) !== recv) return;
        this.accepted.delete(key);
        this.settle(recv.id, error);
      },
    );
    this.hooks.sendControl(peer, { type: 'p2p-answer', sequence: offer.sequence, outcome: 'accepted', message: '' });
  }

  /** The call's own timeout, or the job's. */
  private timeoutOf(request: PeerRequest): number {
    return request.timeoutMs ?? this.settings.timeoutMs;
  }

  private deadline(request: PeerRequest, expire: () => void): NodeJS.Timeout | undefined {
    const ms = this.timeoutOf(request);
    return ms > 0 ? setTimeout(expire, ms) : undefined;
  }

  private settle(id: number, error: unknown): void {
    this.hooks.post({ type: 'failed', id, error: toErrorRecord(error) });
  }
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function describe(request: PeerRequest): string {
  return request.op === 'send'
    ? `send of ${request.length} ${request.dtype} to rank ${request.peer} (tag ${request.tag})`
    : `recv of ${request.length} ${request.dtype} from rank ${request.peer} (tag ${request.tag})`;
}
