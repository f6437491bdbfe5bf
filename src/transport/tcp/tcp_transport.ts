/**
 * TcpTransport: the Transport contract (../transport.ts) over the sockets of a connected mesh.
 *
 * How it works: per peer, a PeerReceiver reads the connection we dialed (receiver.ts) and a
 * PeerSender writes the connection the peer dialed (sender.ts); rendezvous/mesh.ts says why
 * there are two. Ordering: frames to one peer go out in call order on one socket, so data is
 * FIFO per (peer, tag) and control is FIFO per peer; a control message queues behind data
 * already handed to the socket.
 *
 * Failures: close, reset, end or an error on the receive socket, or a malformed frame, fails
 * the peer once: every pending and future op with it rejects with one PeerFailureError naming
 * the rank and address, both sockets are destroyed, and the onPeerFailure handlers run. Only
 * messages that had arrived whole can still be taken by a later recv. When the send socket
 * breaks first (the usual order when a peer closes right after its last send), sends fail at
 * once but the receive side drains up to its end (at most kDrainGraceMs) before the peer
 * fails, so that last message is not lost.
 *
 * Deadlines (../watchdog.ts): an op with no progress for ioTimeoutMs rejects with TimeoutError,
 * and the link to that peer is then torn down like a failure: the stream position is unknown,
 * and a torn-down socket can no longer write into a buffer whose recv has already rejected.
 * With liveness on (heartbeatMs > 0, ../liveness.ts), while the transport is active (setActive, or
 * ops pending) silent peers are found by pings, and a recv from a peer that is still heard from
 * is given more time, so that the rank that is really stuck is detected, and named, first.
 *
 * Idle: with no op pending and setActive(false) (the default), the transport has no timer and
 * writes nothing; it only answers the pings of active peers. TCP keepalive on every socket lets
 * the kernel find a dead host or a cut network meanwhile, without waking this process.
 *
 * Shared fate (option `shareFate`, what a job wants: a collective needs every rank): the first
 * peer failure breaks the whole transport. Every pending and future op, with any peer, rejects
 * with the PeerFailureError naming that first rank, and a notice (framing.ts) tells every other
 * peer, which breaks the same way, naming the same rank: no rank waits for a peer that is
 * itself waiting for the dead one. A clean `close()` sends a goodbye first, so peers see a
 * departure, not a failure, and pass nothing on.
 *
 * Shared memory (option `sharedMemory`): every link offers the peer a shared-memory lane for
 * large data messages (shm_lane.ts); a peer on the same host accepts it, others decline, and the
 * socket carries everything as before. The lane's files are released with the transport.
 */

import type net from 'node:net';
import { BufferPool } from '../../core/buffer_pool.js';
import { InvalidArgumentError, PeerFailureError, ProtocolError, ShutdownError, TimeoutError } from '../../core/errors.js';
import { afterThisTask } from '../../core/soon.js';
import type { PeerLink } from '../../rendezvous/mesh.js';
import { ControlInbox } from '../control_inbox.js';
import { Liveness } from '../liveness.js';
import { type OpKind, type PendingOp, startOp } from '../pending_op.js';
import { type ControlHandler, invalidPeerOrTag, type PeerFailureHandler, type Transport } from '../transport.js';
import { Watchdog } from '../watchdog.js';
import {
  type FrameLimits,
  kDefaultMaxControlBytes,
  kDefaultMaxFrameBytes,
  kKindControl,
  kKindData,
  kLinkBye,
  kLinkHeartbeat,
  kLinkNotice,
  kLinkPing,
  kLinkShmAccept,
  kLinkShmCredit,
  kLinkShmDecline,
  kLinkShmOffer,
  kMaxU32,
  readU32,
} from './framing.js';
import { decodeNotice, encodeNotice } from './notice.js';
import { PeerReceiver, type ReceiveStats } from './receiver.js';
import { PeerSender } from './sender.js';
import { decodeOffer, encodeOffer, ShmInbox, type ShmLaneOptions, ShmOutbox } from './shm_lane.js';
import { describeError, destroyAndWait, flushed, watch } from './sockets.js';

export interface TcpTransportOptions {
  /** A send or recv with no progress for this long rejects with TimeoutError. */
  ioTimeoutMs: number;
  /** Largest data message (bounds what a peer's header can make us allocate). */
  maxFrameBytes?: number;
  maxControlBytes?: number;
  /** One peer's failure breaks every link, and the other peers are told (see above). Default false. */
  shareFate?: boolean;
  /**
   * Ping interval of liveness while active (../liveness.ts); 0 or unset: no liveness. The silence
   * limit is ioTimeoutMs, so the interval is capped at a third of it.
   */
  heartbeatMs?: number;
  /** Offer every peer a shared-memory lane for large data messages (see above); unset: none. */
  sharedMemory?: ShmLaneOptions;
  /** Says, once per transport, that the lane could not be used (a full /dev/shm): slower, not wrong. */
  warn?: (message: string) => void;
}

interface Peer {
  link: PeerLink;
  who: string;
  receiver: PeerReceiver;
  sender: PeerSender;
  failure: PeerFailureError | null;
  /** The send connection broke first; the receive side drains until `drainTimer` fires. */
  sendFailure: PeerFailureError | null;
  drainTimer: NodeJS.Timeout | null;
  /** Our lane to the peer (offered, or in use once accepted), and the peer's lane to us. */
  outbox: ShmOutbox | null;
  inbox: ShmInbox | null;
  /** A flush of the credits owed to the peer is due at the end of this task (see credit). */
  creditFlush: boolean;
}

/** Free staging memory kept for reuse, across all peers. */
const kStagingRetainBytes = 64 * 1024 * 1024;
/** How long the receive side may keep delivering after the send side of a peer broke. */
const kDrainGraceMs = 1000;
/** Shortest idle time before the kernel probes a connection (TCP keepalive works in seconds). */
const kMinKeepAliveMs = 1000;

export class TcpTransport implements Transport {
  private readonly peers: (Peer | undefined)[];
  private readonly pending = new Set<PendingOp>();
  private readonly limits: FrameLimits;
  private readonly ioTimeoutMs: number;
  private readonly watchdog: Watchdog;
  private readonly controlInbox = new ControlInbox();
  private readonly failureHandlers: PeerFailureHandler[] = [];
  private closing: Promise<void> | null = null;
  private readonly shareFate: boolean;
  /** Set once a failure broke the whole transport (shareFate). */
  private broken: PeerFailureError | null = null;
  private readonly liveness: Liveness | null = null;
  private readonly heartbeatMs: number;
  /** The lane's loss was said (laneLost). */
  private laneWarned = false;
  /** Whether the sockets keep the process alive (holdProcess). */
  private holding = true;
  private readonly companions: { hold(hold: boolean): void }[] = [];
  /** The engine has collectives pending (setActive). */
  private active = false;
  private readonly sharedMemory: ShmLaneOptions | undefined;
  private readonly warn: ((message: string) => void) | undefined;
  /** Staging of large messages that arrive before their recv, reused (receiver.ts). */
  private readonly stagingPool = new BufferPool(kStagingRetainBytes);

  constructor(
    readonly rank: number,
    readonly size: number,
    links: readonly PeerLink[],
    options: TcpTransportOptions,
  ) {
    if (!(options.ioTimeoutMs > 0)) throw new InvalidArgumentError(`ioTimeoutMs must be positive, got ${options.ioTimeoutMs}`);
    this.ioTimeoutMs = options.ioTimeoutMs;
    this.limits = {
      maxFrameBytes: Math.min(options.maxFrameBytes ?? kDefaultMaxFrameBytes, kMaxU32),
      maxControlBytes: Math.min(options.maxControlBytes ?? kDefaultMaxControlBytes, kMaxU32),
    };
    this.shareFate = options.shareFate ?? false;
    this.sharedMemory = options.sharedMemory;
    this.warn = options.warn;
    this.heartbeatMs = Math.min(options.heartbeatMs ?? 0, Math.max(1, Math.floor(this.ioTimeoutMs / 3)));
    this.peers = new Array(size).fill(undefined);
    for (const link of links) this.peers[link.peer] = this.attach(link);
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
              lastHeard: () => p.receiver.lastReadAt,
              backlog: () => p.sender.backlog,
              ping: () => p.sender.sendLink(kLinkPing),
              usable: () => p.failure === null && p.sendFailure === null,
            },
        ),
        wanted: () => this.active || this.pending.size > 0,
        onSilent: (peer, silentMs) =>
          this.failPeer(
            peer,
            `sent nothing for ${silentMs} ms, not even a heartbeat in answer to a ping: the process is stopped or hung, its host is down, or the network is cut`,
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

  /**
   * The engine has collectives pending (true) or none (false): while true, liveness watches the
   * peers even with no op pending. Once false and no op is pending, liveness stops at its next
   * tick (when its pings were answered) and the transport schedules nothing.
   */
  setActive(active: boolean): void {
    this.active = active;
    if (active) this.liveness?.activate();
  }

  holdProcess(hold: boolean): void {
    this.holding = hold;
    for (const p of this.peers) if (p !== undefined) this.holdSockets(p);
    for (const resource of this.companions) resource.hold(hold);
  }

  /** Holds `resource` (the store server this rank hosts) alive as the transport's own sockets (holdProcess). */
  alsoHold(resource: { hold(hold: boolean): void }): void {
    this.companions.push(resource);
    resource.hold(this.holding);
  }

  private holdSockets(p: Peer): void {
    for (const socket of [p.link.recvSocket, p.link.sendSocket]) {
      if (this.holding) socket.ref();
      else socket.unref();
    }
  }

  /** Whether liveness has a timer armed (for tests: an idle transport has none). */
  get watching(): boolean {
    return this.liveness?.running ?? false;
  }

  /** Peers this rank sends large messages to through a shared-memory lane. */
  lanesInUse(): number {
    return this.peers.filter((p) => p?.sender.usesLane).length;
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

  /** Where the data payload bytes received so far went (see ReceiveStats). */
  stats(): ReceiveStats {
    const total: ReceiveStats = { zeroCopyBytes: 0, copiedBytes: 0, stagedBytes: 0, sharedBytes: 0 };
    for (const p of this.peers) {
      total.sharedBytes += p?.receiver.stats.sharedBytes ?? 0;
      total.zeroCopyBytes += p?.receiver.stats.zeroCopyBytes ?? 0;
      total.copiedBytes += p?.receiver.stats.copiedBytes ?? 0;
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
    const failure = kind === 'recv' ? null : (p.failure ?? p.sendFailure);
    if (failure) return Promise.reject(failure);
    const [op, promise] = startOp(kind, peer, tag, this.pending);
    go(p, op);
    if (!op.done) this.watchdog.ensure();
    // After go(): the op's frame leaves before any ping.
    this.liveness?.activate();
    return promise;
  }

  private attach(link: PeerLink): Peer {
    const who = `rank ${link.peer} (${link.address})`;
    const fail = (cause: string) => this.failPeer(link.peer, cause);
    const p: Peer = {
      link,
      who,
      receiver: new PeerReceiver({
        limits: this.limits,
        who,
        onControl: (payload) => this.controlInbox.deliver(link.peer, payload),
        onLink: (message, payload) => this.onLink(link.peer, message, payload),
        onViolation: (error) => fail(`sent a malformed frame: ${error.message}`),
        stagingPool: this.stagingPool,
        shared: () => {
          const inbox = p.inbox;
          return inbox === null
            ? undefined
            : {
                slots: inbox.slots,
                read: (slot, into) => inbox.read(slot, into),
                release: (slot) => this.credit(p, slot),
                owed: () => p.sender.owedCredits,
                returnOwed: () => {
                  if (!p.failure && !p.sendFailure && !this.closing) p.sender.flushCredits();
                },
              };
        },
      }),
      sender: new PeerSender(
        link.sendSocket,
        (error) => fail(`write failed: ${describeError(error)}`),
        (error) => this.laneLost(link.peer, error),
      ),
      failure: null,
      sendFailure: null,
      drainTimer: null,
      outbox: null,
      inbox: null,
      creditFlush: false,
    };
    // The receive connection fails the peer at once: its bytes up to the end were delivered.
    watch(link.recvSocket, 'receive', fail);
    // The send connection usually ends because the peer closed, and the frames it sent just
    // before are still in our receive socket: let them drain before failing the peer.
    watch(link.sendSocket, 'send', (cause) => this.failSend(p, cause));
    // Nagle would hold small frames back for an ACK; keepalive finds a dead host while idle.
    for (const socket of [link.recvSocket, link.sendSocket]) {
      socket.setNoDelay(true);
      socket.setKeepAlive(true, Math.max(kMinKeepAliveMs, this.ioTimeoutMs));
    }
    // The peer never writes on the connection we send on; bytes there mean a confused peer.
    link.sendSocket.on('data', () => fail('wrote on its receive-only connection'));
    this.offerLane(p);
    this.holdSockets(p);
    link.recvPort.attach(p.receiver);
    link.recvSocket.resume(); // the handshake paused it
    if (link.recvSocket.destroyed || link.sendSocket.destroyed) {
      queueMicrotask(() => fail('connection closed before the transport started'));
    }
    return p;
  }

  /** Offers the peer a shared-memory lane; without a usable directory, the socket does it all. */
  private offerLane(p: Peer): void {
    if (this.sharedMemory === undefined) return;
    try {
      p.outbox = new ShmOutbox(this.sharedMemory, `${this.rank}to${p.link.peer}`);
    } catch (error) {
      // No such directory is a machine without one; anything else (full, read-only) is worth a word.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.laneLost(p.link.peer, error);
      return;
    }
    p.sender.sendLink(kLinkShmOffer, encodeOffer(p.outbox.offer));
  }

  /** The lane to `peer` cannot be used: large messages take the socket (slower, still right); said once. */
  private laneLost(peer: number, error: unknown): void {
    if (this.laneWarned) return;
    this.laneWarned = true;
    const dir = this.sharedMemory?.dir ?? '/dev/shm';
    this.warn?.(
      `the shared-memory lane to rank ${peer} is off (${(error as Error)?.message ?? String(error)}): large messages between ranks of this host take the socket, which is slower. Give ${dir} more room (docker run --shm-size) or set RINGREDUCE_SHARED_MEMORY=0`,
    );
  }

  /**
   * A slot of the peer's lane was read: it goes back with the next frame this rank writes to the
   * peer (in a ring, the next step's message), or in a frame of its own at the end of this task
   * once half of the lane's slots are owed, or once the owed slots and those unclaimed messages
   * hold here (receiver.ts) leave the peer one slot at most. So the peer always has a slot free or
   * on its way back (it never waits on a credit held here), and is not woken by a credit when a
   * frame of this rank's is coming anyway.
   */
  private credit(p: Peer, slot: number): void {
    p.sender.owe(slot);
    const slots = p.inbox?.slots ?? 1;
    const owed = p.sender.owedCredits;
    if (p.creditFlush || (owed < Math.max(1, Math.floor(slots / 2)) && owed + p.receiver.heldSlots < slots - 1)) return;
    p.creditFlush = true;
    afterThisTask(() => {
      p.creditFlush = false;
      if (p.failure || p.sendFailure || this.closing) return;
      p.sender.flushCredits();
    });
  }

  private onLaneMessage(p: Peer, message: number, payload: Uint8Array): void {
    if (message === kLinkShmOffer) {
      const inbox = this.sharedMemory === undefined ? undefined : ShmInbox.accept(decodeOffer(payload));
      p.inbox?.close();
      p.inbox = inbox ?? null;
      p.sender.sendLink(inbox ? kLinkShmAccept : kLinkShmDecline);
    } else if (message === kLinkShmAccept) {
      if (p.outbox === null) throw new ProtocolError('accepted a shared-memory lane that was not offered');
      p.outbox.unlink();
      p.sender.useLane(p.outbox);
    } else if (message === kLinkShmDecline) {
      p.outbox?.close();
      p.outbox = null;
    } else {
      const slots: number[] = [];
      for (let at = 0; at < payload.byteLength; at += 4) slots.push(readU32(payload, at));
      p.sender.credit(slots);
    }
  }

  private closeLanes(p: Peer): void {
    p.outbox?.close();
    p.inbox?.close();
    p.outbox = null;
    p.inbox = null;
  }

  private failSend(p: Peer, cause: string): void {
    if (p.failure || p.sendFailure || this.closing) return;
    p.sendFailure = new PeerFailureError(`${p.who}: ${cause}`, p.link.peer);
    p.sender.fail(p.sendFailure);
    p.drainTimer = setTimeout(() => this.failPeer(p.link.peer, cause), Math.min(kDrainGraceMs, this.ioTimeoutMs));
  }

  private failPeer(peer: number, cause: string): void {
    const p = this.peers[peer];
    if (p === undefined || p.failure || this.closing) return;
    const failure = p.sendFailure ?? new PeerFailureError(`${p.who}: ${cause}`, peer);
    this.markFailed(p, failure, true);
    if (this.shareFate) this.breakAll(peer, failure, cause);
  }

  /** Fails one peer's link: its pending ops reject, its handlers run; `destroy` closes its sockets. */
  private markFailed(p: Peer, failure: PeerFailureError, destroy: boolean): void {
    if (p.drainTimer) clearTimeout(p.drainTimer);
    p.failure = failure;
    p.receiver.fail(failure);
    p.sender.fail(failure);
    if (destroy) {
      p.link.recvSocket.destroy();
      p.link.sendSocket.destroy();
    }
    this.closeLanes(p);
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
   * same error. The other links stay open (a notice must not be cut off, and the peers are
   * breaking too); close() releases them.
   */
  private breakAll(culprit: number, failure: PeerFailureError, cause: string): void {
    if (this.broken || this.closing) return;
    this.broken = failure;
    this.liveness?.stop();
    const notice = encodeNotice(culprit, cause);
    for (const p of this.peers) if (p && !p.failure && !p.sendFailure) p.sender.sendLink(kLinkNotice, notice);
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
      if (!p.failure && !p.sendFailure && !this.closing) p.sender.sendLink(kLinkHeartbeat);
      return;
    }
    if (message >= kLinkShmOffer && message <= kLinkShmCredit) {
      if (p.failure || this.closing) return;
      try {
        this.onLaneMessage(p, message, payload);
      } catch (error) {
        this.failPeer(from, `broke the shared-memory lane protocol: ${(error as Error).message}`);
      }
      return;
    }
    if (message !== kLinkNotice || !this.shareFate || this.broken || this.closing) return; // heartbeat: the read was stamped
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
    const sockets: net.Socket[] = [];
    const byes: Promise<void>[] = [];
    for (const p of this.peers) {
      if (p === undefined) continue;
      if (p.drainTimer) clearTimeout(p.drainTimer);
      // A goodbye behind whatever was already written: the peer sees us leave, not fail.
      if (!this.broken && !p.failure && !p.sendFailure) {
        p.sender.sendLink(kLinkBye);
        byes.push(flushed(p.link.sendSocket));
      }
      p.receiver.fail(error);
      p.sender.fail(error);
      this.closeLanes(p);
      sockets.push(p.link.recvSocket, p.link.sendSocket);
    }
    for (const op of [...this.pending]) op.reject(error);
    await Promise.all(byes);
    await Promise.all(sockets.map(destroyAndWait));
  }
}
