/**
 * The memory transport: N ranks in one thread, for tests of the algorithms and the engine, with
 * fault injection. It honours the whole contract of transport.ts.
 *
 * How it works: every directed link (src → dst) is a FIFO queue of envelopes drained
 * asynchronously (a microtask, or a macrotask so that timers and I/O interleave, or a seeded
 * random number of macrotask hops per envelope so that links race each other while each link
 * keeps its order). Delivery copies the bytes straight into a posted receive, or stages a copy
 * until one is posted; a send resolves at delivery, when its bytes have been read. In
 * rendezvous mode a send instead stays pending, bytes unread, until a receive takes it: a
 * backend with no buffering at all, which deadlocks any algorithm that sends and only then
 * receives.
 *
 * Faults: breakLink(a, b) makes every pending and future operation between a and b reject with
 * PeerFailureError naming the other rank, and calls each side's onPeerFailure once. close() (and
 * kill(rank), which is a close seen from outside) rejects the rank's own pending operations with
 * ShutdownError and breaks all its links, as a vanished process would for its peers.
 *
 * As a backend (../backend.ts): `memoryBackend(world)` hands out world[config.rank]. A world lives
 * in the one thread that made it, so it is never chosen by configuration (backends.ts): only the
 * code that holds the world can pass its factory on.
 */
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../core/errors.js';
import { type BackendFactory, handleOf } from '../backend.js';
import { BrokenLinks } from '../broken_links.js';
import { type ControlHandler, invalidPeerOrTag, type PeerFailureHandler, type Transport } from '../transport.js';

export interface MemoryWorldOptions {
  /** A receive (or, in rendezvous mode, a send) that waits longer rejects with TimeoutError. Default 30 s. */
  ioTimeoutMs?: number;
  /** How envelopes are drained: 'microtask' (fastest) or 'macrotask' (setImmediate). Default 'macrotask'. */
  delivery?: 'microtask' | 'macrotask';
  /** Random delivery delays of 0..maxHops macrotask hops per envelope, from a seeded generator. */
  jitter?: { seed: number; maxHops?: number };
  /** Sends resolve only once a receive has taken their bytes (no staging). */
  rendezvous?: boolean;
}

export interface MemoryWorld extends Array<MemoryTransport> {
  /** Rank `rank` disappears: its peers' operations with it fail with PeerFailureError. */
  kill(rank: number): void;
  /** The link between a and b breaks; both sides see PeerFailureError naming the other. */
  breakLink(a: number, b: number): void;
  /** Closes every rank. */
  closeAll(): Promise<void>;
}

export const kDefaultIoTimeoutMs = 30_000;

interface Envelope {
  readonly src: number;
  readonly dst: number;
  readonly control: boolean;
  readonly tag: number;
  readonly data: Uint8Array;
  settled: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
  resolve(): void;
  reject(error: Error): void;
}

interface PendingRecv {
  readonly peer: number;
  readonly tag: number;
  readonly into: Uint8Array;
  readonly timer: ReturnType<typeof setTimeout>;
  resolve(): void;
  reject(error: Error): void;
}

interface Staged {
  readonly data: Uint8Array;
  /** The unresolved send in rendezvous mode. */
  readonly envelope: Envelope | undefined;
}

interface Channel {
  readonly posted: PendingRecv[];
  readonly staged: Staged[];
}

interface Link {
  readonly queue: Envelope[];
  scheduled: boolean;
}

/** N connected in-process transports; index r is rank r. */
export function createMemoryWorld(size: number, options: MemoryWorldOptions = {}): MemoryWorld {
  if (!Number.isSafeInteger(size) || size < 1) throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  const fabric = new Fabric(size, options);
  const world = fabric.transports as MemoryWorld;
  world.kill = (rank) => fabric.kill(rank);
  world.breakLink = (a, b) => fabric.breakLink(a, b);
  world.closeAll = async () => {
    await Promise.all(fabric.transports.map((t) => t.close()));
  };
  return world;
}

/** The backend factory over `world`: each config gets its rank's transport; closing the handle closes that rank. */
export function memoryBackend(world: MemoryWorld): BackendFactory {
  return async (config) => {
    if (config.size !== world.length) {
      throw new InvalidArgumentError(`this memory world has ${world.length} ranks, the configuration asks for ${config.size}`);
    }
    return handleOf(world[config.rank] as MemoryTransport);
  };
}

/** The state shared by the ranks of one world: links, broken pairs, delivery scheduling. */
class Fabric {
  readonly transports: MemoryTransport[] = [];
  readonly ioTimeoutMs: number;
  readonly rendezvous: boolean;
  private readonly links: Link[];
  readonly broken: BrokenLinks;
  private readonly microtask: boolean;
  private readonly maxHops: number;
  private seed: number;

  constructor(
    readonly size: number,
    options: MemoryWorldOptions,
  ) {
    const { ioTimeoutMs = kDefaultIoTimeoutMs, delivery = 'macrotask', jitter, rendezvous = false } = options;
    if (!(ioTimeoutMs > 0)) throw new InvalidArgumentError(`ioTimeoutMs must be positive, got ${ioTimeoutMs}`);
    if (delivery !== 'microtask' && delivery !== 'macrotask') {
      throw new InvalidArgumentError(`delivery must be 'microtask' or 'macrotask', got ${String(delivery)}`);
    }
    this.ioTimeoutMs = ioTimeoutMs;
    this.rendezvous = rendezvous;
    this.microtask = delivery === 'microtask' && jitter === undefined;
    this.maxHops = jitter ? (jitter.maxHops ?? 3) : 0;
    this.seed = jitter ? jitter.seed >>> 0 : 0;
    this.links = Array.from({ length: size * size }, () => ({ queue: [], scheduled: false }));
    this.broken = new BrokenLinks(size);
    for (let rank = 0; rank < size; rank++) this.transports.push(new MemoryTransport(rank, this));
  }

  enqueue(envelope: Envelope): void {
    const link = this.links[envelope.src * this.size + envelope.dst] as Link;
    link.queue.push(envelope);
    this.schedule(link);
  }

  breakLink(a: number, b: number): void {
    if (!this.broken.break(a, b)) return;
    (this.transports[a] as MemoryTransport).linkBroke(b);
    (this.transports[b] as MemoryTransport).linkBroke(a);
  }

  kill(rank: number): void {
    const transport = this.transports[rank];
    if (!transport) throw new InvalidArgumentError(`rank must be in [0, ${this.size}), got ${rank}`);
    void transport.close(`rank ${rank} was killed`);
  }

  private schedule(link: Link): void {
    if (link.scheduled) return;
    link.scheduled = true;
    const flush = () => this.flush(link);
    if (this.microtask) {
      queueMicrotask(flush);
      return;
    }
    let hops = this.maxHops > 0 ? this.random() % (this.maxHops + 1) : 0;
    const hop = () => (hops-- > 0 ? setImmediate(hop) : flush());
    setImmediate(hop);
  }

  private flush(link: Link): void {
    link.scheduled = false;
    // With jitter one envelope per turn, so that the links of a rank race each other.
    let budget = this.maxHops > 0 ? 1 : link.queue.length;
    while (budget-- > 0 && link.queue.length > 0) {
      const envelope = link.queue.shift() as Envelope;
      if (!envelope.settled) (this.transports[envelope.dst] as MemoryTransport).deliver(envelope);
    }
    if (link.queue.length > 0) this.schedule(link);
  }

  /** mulberry32: a tiny seeded generator, so a failing interleaving can be replayed. */
  private random(): number {
    this.seed = (this.seed + 0x6d2b79f5) >>> 0;
    let t = this.seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
}

export class MemoryTransport implements Transport {
  readonly size: number;
  private closed = false;
  private closeReason = 'transport closed';
  private readonly channels = new Map<number, Channel>();
  private readonly outgoing = new Set<Envelope>();
  private readonly failedPeers = new Set<number>();
  private readonly earlyControl: Array<[number, Uint8Array]> = [];
  private controlHandler: ControlHandler | undefined;
  private failureHandler: PeerFailureHandler | undefined;

  /** @internal Built by createMemoryWorld. */
  constructor(
    readonly rank: number,
    private readonly fabric: Fabric,
  ) {
    this.size = fabric.size;
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    return this.post(peer, tag, data, false);
  }

  sendControl(peer: number, payload: Uint8Array): Promise<void> {
    return this.post(peer, 0, payload, true);
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    const refused = this.refuse(peer, tag);
    if (refused) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      const channel = this.channel(peer, tag);
      let staged = channel.staged.shift();
      // A rendezvous send that timed out is withdrawn: skip it.
      while (staged?.envelope?.settled) staged = channel.staged.shift();
      if (staged) {
        take(staged, { peer, tag, into, resolve, reject });
        return;
      }
      const ms = this.fabric.ioTimeoutMs;
      const timer = setTimeout(() => {
        const index = channel.posted.indexOf(pending);
        if (index >= 0) channel.posted.splice(index, 1);
        reject(new TimeoutError(`recv from rank ${peer} (tag ${tag}) on rank ${this.rank}: no data for ${ms} ms`));
      }, ms);
      const pending: PendingRecv = { peer, tag, into, timer, resolve, reject };
      channel.posted.push(pending);
    });
  }

  onControl(handler: ControlHandler): void {
    this.controlHandler = handler;
    for (const [peer, payload] of this.earlyControl.splice(0)) handler(peer, payload);
  }

  onPeerFailure(handler: PeerFailureHandler): void {
    this.failureHandler = handler;
  }

  close(reason = `rank ${this.rank}: transport closed`): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.closeReason = reason;
    const error = () => new ShutdownError(reason);
    for (const envelope of this.outgoing) settle(envelope, error());
    this.outgoing.clear();
    for (const channel of this.channels.values()) {
      for (const pending of channel.posted.splice(0)) {
        clearTimeout(pending.timer);
        pending.reject(error());
      }
      channel.staged.length = 0;
    }
    this.earlyControl.length = 0;
    for (let peer = 0; peer < this.size; peer++) if (peer !== this.rank) this.fabric.breakLink(this.rank, peer);
    return Promise.resolve();
  }

  /** @internal The fabric hands over an envelope from `envelope.src`. */
  deliver(envelope: Envelope): void {
    if (this.closed) return; // the sender learns through the broken link
    if (envelope.control) {
      const payload = envelope.data.slice();
      settle(envelope);
      if (this.controlHandler) this.controlHandler(envelope.src, payload);
      else this.earlyControl.push([envelope.src, payload]);
      return;
    }
    const channel = this.channel(envelope.src, envelope.tag);
    const pending = channel.posted.shift();
    if (pending) {
      clearTimeout(pending.timer);
      take({ data: envelope.data, envelope }, pending);
    } else if (this.fabric.rendezvous) {
      channel.staged.push({ data: envelope.data, envelope });
    } else {
      channel.staged.push({ data: envelope.data.slice(), envelope: undefined });
      settle(envelope);
    }
  }

  /** @internal The link to `peer` broke: fail everything pending with it, tell the handler once. */
  linkBroke(peer: number): void {
    if (this.closed) return;
    const error = () => new PeerFailureError(`rank ${this.rank}: link to rank ${peer} broke`, peer);
    for (const envelope of this.outgoing) if (envelope.dst === peer) settle(envelope, error());
    for (const [key, channel] of this.channels) {
      if (key % this.size !== peer) continue;
      for (const pending of channel.posted.splice(0)) {
        clearTimeout(pending.timer);
        pending.reject(error());
      }
      for (const staged of channel.staged.splice(0)) {
        if (staged.envelope) settle(staged.envelope, new PeerFailureError(`link to rank ${this.rank} broke`, this.rank));
      }
    }
    if (this.failedPeers.has(peer)) return;
    this.failedPeers.add(peer);
    this.failureHandler?.(peer, error());
  }

  private post(peer: number, tag: number, data: Uint8Array, control: boolean): Promise<void> {
    const refused = this.refuse(peer, tag);
    if (refused) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      const envelope: Envelope = {
        src: this.rank,
        dst: peer,
        control,
        tag,
        data,
        settled: false,
        timer: undefined,
        resolve: () => {
          this.outgoing.delete(envelope);
          resolve();
        },
        reject: (error) => {
          this.outgoing.delete(envelope);
          reject(error);
        },
      };
      if (this.fabric.rendezvous && !control) {
        const ms = this.fabric.ioTimeoutMs;
        envelope.timer = setTimeout(() => {
          settle(envelope, new TimeoutError(`send to rank ${peer} (tag ${tag}) on rank ${this.rank}: not taken for ${ms} ms`));
        }, ms);
      }
      this.outgoing.add(envelope);
      this.fabric.enqueue(envelope);
    });
  }

  private refuse(peer: number, tag: number): Error | undefined {
    if (this.closed) return new ShutdownError(this.closeReason);
    const invalid = invalidPeerOrTag(this.rank, this.size, peer, tag);
    if (invalid) return invalid;
    return this.fabric.broken.refusal(this.rank, peer);
  }

  private channel(peer: number, tag: number): Channel {
    const key = tag * this.size + peer;
    let channel = this.channels.get(key);
    if (!channel) {
      channel = { posted: [], staged: [] };
      this.channels.set(key, channel);
    }
    return channel;
  }
}

/** Completes a send once; later outcomes (a timeout racing a delivery) are ignored. */
function settle(envelope: Envelope, error?: Error): void {
  if (envelope.settled) return;
  envelope.settled = true;
  if (envelope.timer !== undefined) clearTimeout(envelope.timer);
  if (error) envelope.reject(error);
  else envelope.resolve();
}

/** Matches a message with a receive: copies on an exact length, ProtocolError otherwise. */
function take(staged: Staged, pending: Pick<PendingRecv, 'peer' | 'tag' | 'into' | 'resolve' | 'reject'>): void {
  const { data } = staged;
  if (data.byteLength !== pending.into.byteLength) {
    pending.reject(
      new ProtocolError(
        `message from rank ${pending.peer} (tag ${pending.tag}) has ${data.byteLength} bytes, the receive expects ${pending.into.byteLength}`,
      ),
    );
  } else {
    pending.into.set(data);
    pending.resolve();
  }
  if (staged.envelope) settle(staged.envelope);
}
