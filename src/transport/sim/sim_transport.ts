/**
 * The simulated transport: N ranks in one thread whose messages take virtual time, so that the
 * real algorithms (src/algorithms/, pure functions over the Transport) can be timed on 1024 ranks
 * and 1 GiB in seconds. It honours the data-plane contract of ../transport.ts (FIFO per peer and
 * tag, exact lengths, send resolves once `data` may be reused), the close contract and broken
 * links (`breakLink`, the only fault it injects); the control plane is minimal (delivered in
 * order per peer, costed like data).
 *
 * How it works: every operation is costed by the network model (network_model.ts) on the virtual
 * clock (clock.ts). A send of b bytes starts when the rank's CPU and send port are both free,
 * holds the send port for b·β and resolves then; its head reaches the peer α after it started and
 * holds the peer's receive port for b·β; the receive resolves when the last byte is in. A
 * reduction charged with `compute` holds the rank's CPU for γ per byte. `now()` is the rank's own
 * time: the clock, or later while its CPU is still busy. A message is paired with its receive by
 * order (the k-th message on a (peer, tag) channel meets the k-th receive), whichever comes
 * first; the bytes are copied once into the receive at pairing, and a message that is still
 * unpaired when its send resolves is staged (copied) so that the sender may reuse its buffer.
 *
 * Large buffers without real memory: `byteScale`. Every real byte of a message is charged as
 * byteScale simulated bytes (and γ likewise). To time a 1 GiB allreduce on 1024 ranks, run it on a
 * 64 KiB real buffer with byteScale 16384 and segmentBytes divided by the same factor
 * (scale.ts): the algorithm sends the same number of messages, between the same ranks, in the
 * same order, with every length scaled down by one factor, and really reduces the small buffers,
 * so the results can still be checked. This beats an "accounting" mode (lengths without buffers)
 * because the algorithms stay untouched and their arithmetic stays real; its limit is rounding:
 * block and segment lengths are rounded to whole elements of the small buffer, so keep at least a
 * few elements per block (scale.ts keeps 16).
 *
 * Deadlines: a receive that nothing can satisfy any more (the clock has run out of actions while
 * it waits) rejects with TimeoutError, stamped `ioTimeout` virtual seconds after it was posted.
 * Only the simulator's own operations advance the clock: code under test must not wait on real
 * timers or I/O while a collective is in flight.
 */
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../core/errors.js';
import { BrokenLinks } from '../broken_links.js';
import { type ControlHandler, invalidPeerOrTag, type PeerFailureHandler, type Transport } from '../transport.js';
import { type Timed, VirtualClock } from './clock.js';
import { createNetworkModel, type NetworkModel, type NetworkParams } from './network_model.js';

export interface SimWorldOptions {
  /** The machine: hosts, link costs and reduction cost. */
  network: NetworkParams;
  /** Simulated bytes per real byte of every message and reduction. Default 1. */
  byteScale?: number;
  /** Virtual seconds after which a receive that can no longer be satisfied rejects. Default 30. */
  ioTimeout?: number;
}

export interface SimWorld extends Array<SimTransport> {
  readonly clock: VirtualClock;
  readonly model: NetworkModel;
  /** The link between a and b breaks; both sides see PeerFailureError naming the other. */
  breakLink(a: number, b: number): void;
  /** Closes every rank. */
  closeAll(): Promise<void>;
}

export const kDefaultSimIoTimeout = 30;

interface PendingRecv {
  resolve(): void;
  reject(error: Error): void;
  readonly peer: number;
  readonly tag: number;
  readonly into: Uint8Array;
  readonly deadline: number;
}

interface Channel {
  readonly messages: Message[];
  readonly recvs: PendingRecv[];
}

/** What happens to a message on the clock. */
const kSent = 0;
const kArrived = 1;
const kDelivered = 2;

/** One message on its way: the clock fires it when its send port is done, its head arrives, its last byte is in. */
class Message implements Timed {
  /** The sender's promise until the send port is done with the message (or it fails). */
  resolveSend: (() => void) | undefined = undefined;
  rejectSend: ((error: Error) => void) | undefined = undefined;
  /** The receive it was paired with, until the message is delivered. */
  recv: PendingRecv | undefined = undefined;
  paired: boolean;
  delivered = false;

  constructor(
    private readonly fabric: SimFabric,
    readonly src: number,
    readonly dst: number,
    readonly tag: number,
    readonly control: boolean,
    /** The sender's bytes until they are copied into a receive or staged. */
    public data: Uint8Array,
  ) {
    this.paired = control;
  }

  fire(kind: number): void {
    if (kind === kSent) this.fabric.sent(this);
    else if (kind === kArrived) this.fabric.arrived(this);
    else (this.fabric.transports[this.dst] as SimTransport).deliver(this);
  }
}

/** N connected simulated transports sharing one virtual clock; index r is rank r. */
export function createSimWorld(size: number, options: SimWorldOptions): SimWorld {
  if (!Number.isSafeInteger(size) || size < 1) throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  const fabric = new SimFabric(size, options);
  const world = fabric.transports as unknown as SimWorld & { clock: VirtualClock; model: NetworkModel };
  world.clock = fabric.clock;
  world.model = fabric.model;
  world.breakLink = (a, b) => {
    for (const rank of [a, b]) {
      if (!Number.isSafeInteger(rank) || rank < 0 || rank >= size) {
        throw new InvalidArgumentError(`rank must be in [0, ${size}), got ${rank}`);
      }
    }
    if (a === b) throw new InvalidArgumentError(`a link joins two different ranks, got ${a} twice`);
    fabric.breakLink(a, b);
  };
  world.closeAll = async () => {
    await Promise.all(fabric.transports.map((t) => t.close()));
  };
  return world;
}

/** What the ranks of one world share: the clock, the model, every port's busy-until time. */
class SimFabric {
  readonly clock = new VirtualClock();
  readonly model: NetworkModel;
  readonly byteScale: number;
  readonly ioTimeout: number;
  readonly transports: SimTransport[] = [];
  /** Virtual time at which each rank's send port, receive port and CPU are next free. */
  readonly sendFree: Float64Array;
  readonly recvFree: Float64Array;
  readonly cpuFree: Float64Array;
  readonly broken: BrokenLinks;

  constructor(
    readonly size: number,
    options: SimWorldOptions,
  ) {
    this.model = createNetworkModel(options.network);
    this.byteScale = options.byteScale ?? 1;
    if (!(this.byteScale > 0) || !Number.isFinite(this.byteScale)) {
      throw new InvalidArgumentError(`byteScale must be a positive number, got ${this.byteScale}`);
    }
    this.ioTimeout = options.ioTimeout ?? kDefaultSimIoTimeout;
    if (!(this.ioTimeout > 0)) throw new InvalidArgumentError(`ioTimeout must be positive, got ${this.ioTimeout}`);
    this.sendFree = new Float64Array(size);
    this.recvFree = new Float64Array(size);
    this.cpuFree = new Float64Array(size);
    this.broken = new BrokenLinks(size);
    for (let rank = 0; rank < size; rank++) this.transports.push(new SimTransport(rank, this));
    this.clock.onIdle = () => this.expire();
  }

  breakLink(a: number, b: number): void {
    if (!this.broken.break(a, b)) return;
    (this.transports[a] as SimTransport).linkBroke(b);
    (this.transports[b] as SimTransport).linkBroke(a);
  }

  /** Puts `message` on the wire: the sender's CPU and send port, then α, then the receive port. */
  transmit(message: Message): void {
    const { clock, model } = this;
    const src = message.src;
    const duration = this.duration(message);
    const start = Math.max(clock.now, this.cpuFree[src] as number, this.sendFree[src] as number);
    this.sendFree[src] = start + duration;
    clock.at(start + duration, message, kSent);
    clock.at(start + model.link(src, message.dst).alpha, message, kArrived);
  }

  /** The send port is done with `message`: stage it if no receive took it yet, release the sender. */
  sent(message: Message): void {
    const resolve = message.resolveSend;
    if (resolve === undefined) return; // failed meanwhile
    message.resolveSend = undefined;
    message.rejectSend = undefined;
    if (!message.paired) message.data = message.data.slice();
    resolve();
  }

  /** The head of `message` reached its receiver: it takes the receive port once that is free. */
  arrived(message: Message): void {
    const dst = message.dst;
    const end = Math.max(this.clock.now, this.recvFree[dst] as number) + this.duration(message);
    this.recvFree[dst] = end;
    this.clock.at(end, message, kDelivered);
  }

  private duration(message: Message): number {
    const bytes = message.control ? message.data.byteLength : message.data.byteLength * this.byteScale;
    return bytes * this.model.link(message.src, message.dst).beta;
  }

  /** Nothing is left to happen: every receive still waiting would wait forever. */
  private expire(): void {
    let deadline = Number.POSITIVE_INFINITY;
    for (const t of this.transports) for (const recv of t.waiting()) deadline = Math.min(deadline, recv.deadline);
    if (deadline === Number.POSITIVE_INFINITY) return;
    this.clock.now = Math.max(this.clock.now, deadline);
    for (const t of this.transports) t.expireReceives(this.ioTimeout);
  }
}

export class SimTransport implements Transport {
  readonly size: number;
  /** Simulated bytes and messages this rank has sent on the data plane. */
  bytesSent = 0;
  messagesSent = 0;
  private closed = false;
  private closeReason = 'transport closed';
  private readonly channels = new Map<number, Channel>();
  private readonly failedPeers = new Set<number>();
  private readonly earlyControl: Array<[number, Uint8Array]> = [];
  private controlHandler: ControlHandler | undefined;
  private failureHandler: PeerFailureHandler | undefined;

  /** @internal Built by createSimWorld. */
  constructor(
    readonly rank: number,
    private readonly fabric: SimFabric,
  ) {
    this.size = fabric.size;
  }

  /** This rank's virtual time: the clock, or later while its CPU is busy with a reduction. */
  now(): number {
    return Math.max(this.fabric.clock.now, this.fabric.cpuFree[this.rank] as number);
  }

  /** Charges this rank's CPU for reducing `bytes` real bytes (γ · byteScale per byte). */
  compute(bytes: number): void {
    const { fabric, rank } = this;
    fabric.cpuFree[rank] = this.now() + bytes * fabric.byteScale * fabric.model.reduceSecondsPerByte;
  }

  /** Charges this rank's CPU for `seconds` of other work (per-message handling, in a simulation of the control plane). */
  spend(seconds: number): void {
    this.fabric.cpuFree[this.rank] = this.now() + seconds;
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    const refused = this.refuse(peer, tag);
    if (refused) return Promise.reject(refused);
    this.bytesSent += data.byteLength * this.fabric.byteScale;
    this.messagesSent++;
    return this.post(new Message(this.fabric, this.rank, peer, tag, false, data));
  }

  sendControl(peer: number, payload: Uint8Array): Promise<void> {
    const refused = this.refuse(peer, 0);
    if (refused) return Promise.reject(refused);
    return this.post(new Message(this.fabric, this.rank, peer, 0, true, payload.slice()));
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    const refused = this.refuse(peer, tag);
    if (refused) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      const deadline = this.fabric.clock.now + this.fabric.ioTimeout;
      const pending: PendingRecv = { peer, tag, into, deadline, resolve, reject };
      const channel = this.channel(peer, tag);
      const message = channel.messages.shift();
      if (message === undefined) {
        channel.recvs.push(pending);
        this.fabric.clock.wake();
      } else {
        this.pair(message, pending);
      }
    });
  }

  onControl(handler: ControlHandler): void {
    this.controlHandler = handler;
    for (const [peer, payload] of this.earlyControl.splice(0)) handler(peer, payload);
  }

  onPeerFailure(handler: PeerFailureHandler): void {
    this.failureHandler = handler;
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closeReason = `rank ${this.rank}: transport closed`;
    this.failAll(
      () => new ShutdownError(this.closeReason),
      () => true,
    );
    this.closed = true;
    this.earlyControl.length = 0;
    for (let peer = 0; peer < this.size; peer++) if (peer !== this.rank) this.fabric.breakLink(this.rank, peer);
    return Promise.resolve();
  }

  /** @internal The last byte of `message` is in this rank's memory. */
  deliver(message: Message): void {
    if (this.closed || this.fabric.broken.has(message.src, this.rank)) return;
    message.delivered = true;
    if (message.control) {
      if (this.controlHandler) this.controlHandler(message.src, message.data);
      else this.earlyControl.push([message.src, message.data]);
      return;
    }
    const recv = message.recv;
    if (recv) {
      message.recv = undefined;
      recv.resolve();
    }
  }

  /** @internal Receives posted before any message came for them. */
  *waiting(): Iterable<PendingRecv> {
    for (const channel of this.channels.values()) yield* channel.recvs;
  }

  /** @internal The clock ran dry: every receive still waiting times out. */
  expireReceives(timeout: number): void {
    for (const channel of this.channels.values()) {
      for (const pending of channel.recvs.splice(0)) {
        pending.reject(
          new TimeoutError(
            `recv from rank ${pending.peer} (tag ${pending.tag}) on rank ${this.rank}: no data for ${timeout} s of virtual time`,
          ),
        );
      }
    }
  }

  /** @internal The link to `peer` broke: fail everything pending with it, tell the handler once. */
  linkBroke(peer: number): void {
    if (this.closed) return;
    const error = () => new PeerFailureError(`rank ${this.rank}: link to rank ${peer} broke`, peer);
    this.failAll(error, (other) => other === peer);
    if (this.failedPeers.has(peer)) return;
    this.failedPeers.add(peer);
    this.failureHandler?.(peer, error());
  }

  private post(message: Message): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      message.resolveSend = resolve;
      message.rejectSend = reject;
      if (!message.control) {
        const receiver = this.fabric.transports[message.dst] as SimTransport;
        const channel = receiver.channel(this.rank, message.tag);
        const recv = channel.recvs.shift();
        if (recv === undefined) channel.messages.push(message);
        else receiver.pair(message, recv);
      }
      this.fabric.transmit(message);
    });
  }

  /** Matches a message with a receive of this rank: copies on an exact length, ProtocolError otherwise. */
  private pair(message: Message, recv: PendingRecv): void {
    message.paired = true;
    if (message.data.byteLength !== recv.into.byteLength) {
      recv.reject(
        new ProtocolError(
          `message from rank ${recv.peer} (tag ${recv.tag}) has ${message.data.byteLength} bytes, the receive expects ${recv.into.byteLength}`,
        ),
      );
      return;
    }
    recv.into.set(message.data);
    if (message.delivered) recv.resolve();
    else message.recv = recv;
  }

  /** Rejects this rank's pending operations with the peers `which` selects. */
  private failAll(error: () => Error, which: (peer: number) => boolean): void {
    for (const [key, channel] of this.channels) {
      if (!which(key % this.size)) continue;
      for (const pending of channel.recvs.splice(0)) pending.reject(error());
      channel.messages.length = 0;
    }
    // Every message in flight has an action on the clock: sends still on this rank's port, and
    // receives of this rank paired with a message still on the wire (it will not be delivered now).
    this.fabric.clock.forEachPending((target) => {
      if (!(target instanceof Message)) return;
      const reject = target.rejectSend;
      if (target.src === this.rank && reject !== undefined && which(target.dst)) {
        target.resolveSend = undefined;
        target.rejectSend = undefined;
        reject(error());
      }
      const recv = target.recv;
      if (target.dst === this.rank && recv !== undefined && which(target.src)) {
        target.recv = undefined;
        recv.reject(error());
      }
    });
  }

  private refuse(peer: number, tag: number): Error | undefined {
    if (this.closed) return new ShutdownError(this.closeReason);
    const invalid = invalidPeerOrTag(this.rank, this.size, peer, tag);
    if (invalid) return invalid;
    return this.fabric.broken.refusal(this.rank, peer);
  }

  /** @internal */
  channel(peer: number, tag: number): Channel {
    const key = tag * this.size + peer;
    let channel = this.channels.get(key);
    if (!channel) {
      channel = { messages: [], recvs: [] };
      this.channels.set(key, channel);
    }
    return channel;
  }
}
