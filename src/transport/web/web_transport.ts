/**
 * WebTransport: the Transport contract (../transport.ts) over one message channel per peer
 * (rendezvous/channel.ts): a WebSocket or an RTCDataChannel, opened and authenticated by mesh.ts. It runs
 * in Node and in a browser alike (no Node import).
 *
 * How it works: per peer, a WebSender (sender.ts) chunks and flow-controls what goes out, and a
 * WebReceiver (receiver.ts) matches what comes in, both over the same channel. Ordering: one
 * channel per peer carries messages in order, and the sender sends them in call order, so data
 * is FIFO per (peer, tag) and control is FIFO per peer, behind the data sent before it.
 *
 * The failure semantics are the TCP backend's (tcp/tcp_transport.ts), message for message:
 * - A channel that closes or errors, or a malformed frame, fails the peer once: every pending
 *   and future op with it rejects with one PeerFailureError naming the rank and address, the
 *   channel is closed and the onPeerFailure handlers run. Messages that arrived whole can still
 *   be taken by a later recv. (One channel carries both directions, and it delivers every
 *   message before its close event, so the TCP backend's drain grace has no counterpart.)
 * - Deadlines (../watchdog.ts): an op with no progress for ioTimeoutMs rejects with
 *   TimeoutError naming the peer and tag, and the link to that peer is then torn down like a
 *   failure. With liveness (heartbeatMs > 0, ../liveness.ts), while the transport is active
 *   (setActive, or ops pending) silent peers are found by pings, and a recv from a peer still
 *   heard from gets more time, so that the rank that is really stuck is named first.
 * - Idle: with no op pending and setActive(false), no timer and no frame; pings of active peers
 *   are still answered.
 * - Shared fate (option `shareFate`): the first peer failure breaks the whole transport, with
 *   the PeerFailureError naming that first rank, and a notice tells every other peer, which
 *   breaks the same way. A clean `close()` sends a goodbye first (after the message in
 *   progress, if any), so peers see a departure, not a failure, and pass nothing on.
 */
import { BufferPool } from '../../core/buffer_pool.js';
import { InvalidArgumentError, PeerFailureError, ShutdownError, TimeoutError } from '../../core/errors.js';
import { type ChannelPort, type ChannelTraits, errorDetail } from '../../rendezvous/channel.js';
import { ControlInbox } from '../control_inbox.js';
import { Liveness } from '../liveness.js';
import { type OpKind, type PendingOp, startOp } from '../pending_op.js';
import { type ControlHandler, invalidPeerOrTag, type PeerFailureHandler, type Transport } from '../transport.js';
import { Watchdog } from '../watchdog.js';
import {
  decodeNotice,
  encodeNotice,
  type FrameLimits,
  kDefaultMaxControlBytes,
  kDefaultMaxFrameBytes,
  kKindControl,
  kKindData,
  kLinkBye,
  kLinkHeartbeat,
  kLinkNotice,
  kLinkPing,
  kMaxU32,
} from './framing.js';
import { WebReceiver, type WebReceiveStats } from './receiver.js';
import { WebSender } from './sender.js';

/** An authenticated channel to one peer, as mesh.ts hands it over. */
export interface WebLink {
  peer: number;
  /** The channel, with the messages that arrived since the handshake. */
  port: ChannelPort;
  /** How the peer was reached, for error messages: its URL, or "data channel". */
  address: string;
  /** Largest raw chunk on this link (framing.ts). */
  chunkBytes: number;
  /** bufferedAmount at which sends pause (sender.ts). */
  highWaterBytes: number;
  /** How this side's channel implementation treats the bytes given to send. */
  traits: ChannelTraits;
}

export interface WebTransportOptions {
  /** A send or recv with no progress for this long rejects with TimeoutError. */
  ioTimeoutMs: number;
  maxFrameBytes?: number;
  maxControlBytes?: number;
  /** One peer's failure breaks every link, and the other peers are told. Default false. */
  shareFate?: boolean;
  /** Ping interval of liveness while active; 0 or unset: none. Capped at a third of ioTimeoutMs. */
  heartbeatMs?: number;
  /** How soon a sender looks at bufferedAmount again where the channel has no event for it. Default kPollMs. */
  pollMs?: number;
}

interface Peer {
  link: WebLink;
  who: string;
  receiver: WebReceiver;
  sender: WebSender;
  failure: PeerFailureError | null;
}

/** 1 ms: a WebSocket drains a megabyte in about that time on a fast link (a browser may round it up to 4). */
export const kPollMs = 1;
/** Free staging memory kept for reuse, across all peers. */
const kStagingRetainBytes = 64 * 1024 * 1024;
/** How long a closing transport waits for its goodbyes to be transmitted. */
const kFlushMs = 1000;

export class WebTransport implements Transport {
  private readonly peers: (Peer | undefined)[];
  private readonly pending = new Set<PendingOp>();
  private readonly limits: FrameLimits;
  private readonly ioTimeoutMs: number;
  private readonly watchdog: Watchdog;
  private readonly controlInbox = new ControlInbox();
  private readonly failureHandlers: PeerFailureHandler[] = [];
  private readonly shareFate: boolean;
  private readonly heartbeatMs: number;
  private readonly liveness: Liveness | null = null;
  private readonly stagingPool = new BufferPool(kStagingRetainBytes);
  private broken: PeerFailureError | null = null;
  private closing: Promise<void> | null = null;
  private active = false;

  constructor(
    readonly rank: number,
    readonly size: number,
    links: readonly WebLink[],
    options: WebTransportOptions,
  ) {
    if (!(options.ioTimeoutMs > 0)) throw new InvalidArgumentError(`ioTimeoutMs must be positive, got ${options.ioTimeoutMs}`);
    this.ioTimeoutMs = options.ioTimeoutMs;
    this.limits = {
      maxFrameBytes: Math.min(options.maxFrameBytes ?? kDefaultMaxFrameBytes, kMaxU32),
      maxControlBytes: Math.min(options.maxControlBytes ?? kDefaultMaxControlBytes, kMaxU32),
    };
    this.shareFate = options.shareFate ?? false;
    this.heartbeatMs = Math.min(options.heartbeatMs ?? 0, Math.max(1, Math.floor(this.ioTimeoutMs / 3)));
    this.peers = new Array(size).fill(undefined);
    for (const link of links) this.peers[link.peer] = this.makePeer(link, options.pollMs ?? kPollMs);
    for (let p = 0; p < size; p++) {
      if (p !== rank && this.peers[p] === undefined) throw new InvalidArgumentError(`no link for peer rank ${p}`);
    }
    if (this.heartbeatMs > 0 && size > 1) {
      this.liveness = new Liveness({
        size,
        intervalMs: this.heartbeatMs,
        silenceMs: this.ioTimeoutMs,
        links: this.peers.map(
          (p) =>
            p && {
              lastHeard: () => p.receiver.lastHeardAt,
              backlog: () => p.sender.backlog,
              ping: () => p.sender.sendLink(kLinkPing),
              usable: () => p.failure === null,
            },
        ),
        wanted: () => this.active || this.pending.size > 0,
        onSilent: (peer, silentMs) =>
          this.failPeer(
            peer,
            `sent nothing for ${silentMs} ms, not even a heartbeat in answer to a ping: the page or process is stopped or hung, its host is down, or the network is cut`,
          ),
      });
    }
    const liveness = this.liveness;
    this.watchdog = new Watchdog({
      ioTimeoutMs: this.ioTimeoutMs,
      pending: this.pending,
      heardSince: liveness === null ? null : (peer, since) => liveness.heardSince(peer, since),
      recheckMs: Math.max(1, this.heartbeatMs),
      onExpired: (op, idleMs, silenceMs) => this.expire(op, idleMs, silenceMs),
    });
    // Only now: a port may deliver a close at once, and failing a peer touches every peer.
    for (const p of this.peers)
      p?.link.port.attach({
        message: (bytes) => p.receiver.message(bytes),
        closed: (cause) => this.failPeer(p.link.peer, cause),
      });
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    if (data.byteLength > this.limits.maxFrameBytes) {
      return Promise.reject(
        new InvalidArgumentError(`message of ${data.byteLength} bytes exceeds maxFrameBytes ${this.limits.maxFrameBytes}`),
      );
    }
    return this.start('send', peer, tag, (p, op) => p.sender.send(kKindData, tag, data, op));
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    if (!(into instanceof Uint8Array)) return Promise.reject(new InvalidArgumentError('recv: `into` must be a Uint8Array'));
    return this.start('recv', peer, tag, (p, op) => p.receiver.post(tag, into, op));
  }

  sendControl(peer: number, payload: Uint8Array): Promise<void> {
    if (payload.byteLength > this.limits.maxControlBytes) {
      return Promise.reject(
        new InvalidArgumentError(`control message of ${payload.byteLength} bytes exceeds ${this.limits.maxControlBytes}`),
      );
    }
    return this.start('control', peer, 0, (p, op) => p.sender.send(kKindControl, 0, payload, op));
  }

  /** The engine has collectives pending (true) or none (false): see ../liveness.ts. */
  setActive(active: boolean): void {
    this.active = active;
    if (active) this.liveness?.activate();
  }

  /** Whether liveness has a timer armed (for tests: an idle transport has none). */
  get watching(): boolean {
    return this.liveness?.running ?? false;
  }

  onControl(handler: ControlHandler): void {
    this.controlInbox.setHandler(handler);
  }

  onPeerFailure(handler: PeerFailureHandler): void {
    this.failureHandlers.push(handler);
    for (const p of this.peers) {
      const failure = p?.failure;
      if (failure) queueMicrotask(() => handler(failure.peerRank as number, failure));
    }
  }

  /** Where the data payload bytes received so far went. */
  stats(): WebReceiveStats {
    const total: WebReceiveStats = { directBytes: 0, stagedBytes: 0 };
    for (const p of this.peers) {
      total.directBytes += p?.receiver.stats.directBytes ?? 0;
      total.stagedBytes += p?.receiver.stats.stagedBytes ?? 0;
    }
    return total;
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private start(kind: OpKind, peer: number, tag: number, go: (p: Peer, op: PendingOp) => void): Promise<void> {
    const invalid = invalidPeerOrTag(this.rank, this.size, peer, tag);
    if (invalid) return Promise.reject(invalid);
    if (this.closing) return Promise.reject(new ShutdownError(`transport of rank ${this.rank} is closed`));
    const p = this.peers[peer] as Peer;
    // A recv may still take a message that arrived whole before the failure (receiver.post).
    if (kind !== 'recv' && p.failure) return Promise.reject(p.failure);
    const [op, promise] = startOp(kind, peer, tag, this.pending);
    go(p, op);
    if (!op.done) this.watchdog.ensure();
    this.liveness?.activate();
    return promise;
  }

  private makePeer(link: WebLink, pollMs: number): Peer {
    const who = `rank ${link.peer} (${link.address})`;
    const fail = (cause: string) => this.failPeer(link.peer, cause);
    const p: Peer = {
      link,
      who,
      receiver: new WebReceiver({
        limits: this.limits,
        who,
        onControl: (payload) => this.controlInbox.deliver(link.peer, payload),
        onLink: (message, payload) => this.onLink(link.peer, message, payload),
        onViolation: (error) => fail(`sent a malformed frame: ${error.message}`),
        stagingPool: this.stagingPool,
      }),
      sender: new WebSender({
        channel: link.port.channel,
        chunkBytes: link.chunkBytes,
        highWaterBytes: link.highWaterBytes,
        traits: link.traits,
        pollMs,
        onError: (error) => fail(`send failed${errorDetail(error)}`),
      }),
      failure: null,
    };
    return p;
  }

  private failPeer(peer: number, cause: string): void {
    const p = this.peers[peer];
    if (p === undefined || p.failure || this.closing) return;
    const failure = new PeerFailureError(`${p.who}: ${cause}`, peer);
    this.markFailed(p, failure, true);
    if (this.shareFate) this.breakAll(peer, failure, cause);
  }

  /**
   * Fails one peer's link: its pending ops reject, its handlers run. `release` closes its channel;
   * otherwise (shared fate) the channel stays open and its sender finishes what is in progress, so
   * that a notice queued behind it still goes out.
   */
  private markFailed(p: Peer, failure: PeerFailureError, release: boolean): void {
    p.failure = failure;
    p.receiver.fail(failure);
    if (release) {
      p.sender.fail(failure);
      p.link.port.channel.close();
    } else p.sender.close(failure);
    for (const handler of this.failureHandlers) {
      try {
        handler(p.link.peer, failure);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  /**
   * Shared fate: tells every other peer that `culprit` failed, then fails every link with the
   * same error. The other channels stay open (a notice must not be cut off, and the peers are
   * breaking too); close() releases them.
   */
  private breakAll(culprit: number, failure: PeerFailureError, cause: string): void {
    if (this.broken || this.closing) return;
    this.broken = failure;
    this.liveness?.stop();
    const notice = encodeNotice(culprit, cause);
    for (const p of this.peers) if (p && !p.failure) p.sender.sendLink(kLinkNotice, notice);
    for (const p of this.peers) if (p && !p.failure) this.markFailed(p, failure, false);
  }

  private onLink(from: number, message: number, payload: Uint8Array): void {
    const p = this.peers[from] as Peer;
    if (message === kLinkBye) {
      // A departure, not a failure: nothing is passed on. Whole messages stay claimable.
      if (!p.failure && !this.closing)
        this.markFailed(p, new PeerFailureError(`${p.who} has shut down (left the job)`, from), true);
      return;
    }
    if (message === kLinkPing) {
      // An active peer asks whether we are alive: answer at once, active or not.
      if (!p.failure && !this.closing) p.sender.sendLink(kLinkHeartbeat);
      return;
    }
    if (message !== kLinkNotice || !this.shareFate || this.broken || this.closing) return; // heartbeat: the message was stamped
    let notice: { rank: number; reason: string };
    try {
      notice = decodeNotice(payload, this.size);
    } catch (error) {
      this.failPeer(from, `sent a malformed notice: ${(error as Error).message}`);
      return;
    }
    const { rank, reason } = notice;
    if (rank === this.rank) {
      this.failPeer(from, `declared this rank failed (${reason}); the job is broken`);
      return;
    }
    const culprit = this.peers[rank] as Peer;
    const failure = new PeerFailureError(`rank ${rank} failed: ${reason} (reported by rank ${from})`, rank);
    if (!culprit.failure) this.markFailed(culprit, failure, true);
    this.breakAll(rank, failure, reason);
  }

  private expire(op: PendingOp, idleMs: number, silenceMs: number | undefined): void {
    const p = this.peers[op.peer] as Peer;
    const what =
      op.kind === 'recv'
        ? `recv from ${p.who} with tag ${op.tag}`
        : op.kind === 'send'
          ? `send to ${p.who} with tag ${op.tag}`
          : `control message to ${p.who}`;
    const why =
      silenceMs === undefined
        ? `made no progress for ${this.ioTimeoutMs} ms`
        : `made no progress for ${Math.round(idleMs)} ms, and ${p.who} was not heard from for as long (the silence limit is ${silenceMs} ms)`;
    op.reject(new TimeoutError(`${what} ${why}`));
    this.failPeer(op.peer, `link torn down after a ${op.kind} timed out (no progress for ${Math.round(idleMs)} ms)`);
  }

  private async shutdown(): Promise<void> {
    this.watchdog.stop();
    this.liveness?.stop();
    const error = new ShutdownError(`transport of rank ${this.rank} was closed`);
    const flushes: Promise<void>[] = [];
    for (const p of this.peers) {
      if (p === undefined) continue;
      p.sender.close(error);
      // A goodbye behind the message in progress: the peer sees us leave, not fail. A broken
      // transport sends none, but lets its notices go out (a failed link's sender sends nothing).
      if (!this.broken && !p.failure) p.sender.sendLink(kLinkBye);
      flushes.push(p.sender.flushed(kFlushMs));
      p.receiver.fail(error);
    }
    for (const op of [...this.pending]) op.reject(error);
    await Promise.all(flushes);
    const closed: Promise<void>[] = [];
    for (const p of this.peers) {
      if (p === undefined) continue;
      p.sender.fail(error);
      p.link.port.channel.close();
      // Bounded: a peer that does not answer the closing handshake is dropped by the channel itself.
      closed.push(p.link.port.whenClosed(kFlushMs));
    }
    await Promise.all(closed);
  }
}
