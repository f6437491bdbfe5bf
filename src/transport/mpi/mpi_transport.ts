/**
 * MpiTransport: the Transport contract (../transport.ts) over MPI point-to-point, plus MPI's
 * own collectives as `native` (mpi_collectives.ts), which the executor prefers.
 *
 * How it works: the addon's Comm (native_binding.ts) owns three duplicates of MPI_COMM_WORLD
 * and a progress thread. Data is MPI_Isend/MPI_Irecv on the data communicator, under the
 * transport's tag modulo MPI_TAG_UB + 1: MPI matches messages in order per (source, tag), which
 * is the FIFO the contract asks for, and lands them straight in `into`. Control messages go on
 * their own communicator and are received with MPI_Improbe + MPI_Imrecv, so they may have any
 * length and never match a data receive.
 *
 * Failures: MPI has no notion of a broken link. An operation MPI fails, or one past its
 * deadline, fails its peer the way a broken socket does over TCP: pending and future operations
 * with that peer reject with PeerFailureError and the onPeerFailure handlers run. A rank that
 * dies is the launcher's business: Open MPI's mpirun kills the whole job with a message.
 */

import { InvalidArgumentError, PeerFailureError, type RingReduceError, ShutdownError } from '../../core/errors.js';
import { ControlInbox } from '../control_inbox.js';
import {
  type ControlHandler,
  invalidPeerOrTag,
  type NativeCollectives,
  type PeerFailureHandler,
  type Transport,
} from '../transport.js';
import { MpiCollectives } from './mpi_collectives.js';
import { type OpContext, translateNativeError } from './mpi_errors.js';
import type { CloseResult, MpiBinding, MpiWorldInfo, NativeComm } from './native_binding.js';

export interface MpiTransportOptions {
  /** A send or receive not complete after this long rejects with TimeoutError; also the close deadline. */
  ioTimeoutMs: number;
}

export class MpiTransport implements Transport {
  readonly rank: number;
  readonly size: number;
  readonly native: NativeCollectives;
  private readonly comm: NativeComm;
  private readonly tagModulus: number;
  private readonly ioTimeoutMs: number;
  private readonly controlInbox = new ControlInbox();
  private readonly failureHandlers: PeerFailureHandler[] = [];
  private readonly failures = new Map<number, PeerFailureError>();
  private closing: Promise<CloseResult> | null = null;

  constructor(binding: MpiBinding, world: MpiWorldInfo, options: MpiTransportOptions) {
    if (!(options.ioTimeoutMs > 0)) throw new InvalidArgumentError(`ioTimeoutMs must be positive, got ${options.ioTimeoutMs}`);
    this.rank = world.rank;
    this.size = world.size;
    this.ioTimeoutMs = options.ioTimeoutMs;
    this.tagModulus = world.tagUpperBound + 1;
    this.comm = new binding.Comm({
      ioTimeoutMs: options.ioTimeoutMs,
      onControl: (peer, payload) => this.controlInbox.deliver(peer, payload),
      onLinkError: (peer, message) => this.failPeer(peer, `receiving a control message failed: ${message}`),
    });
    this.native = new MpiCollectives(binding, this.comm, world, options.ioTimeoutMs);
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    const what = `send to rank ${peer} with tag ${tag}`;
    return this.start(peer, tag, what, () => this.comm.send(peer, tag % this.tagModulus, data));
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    if (!(into instanceof Uint8Array)) return Promise.reject(new InvalidArgumentError('recv: `into` must be a Uint8Array'));
    const what = `recv from rank ${peer} with tag ${tag}`;
    return this.start(peer, tag, what, () => this.comm.recv(peer, tag % this.tagModulus, into));
  }

  sendControl(peer: number, payload: Uint8Array): Promise<void> {
    return this.start(peer, 0, `control message to rank ${peer}`, () => this.comm.sendControl(peer, payload));
  }

  onControl(handler: ControlHandler): void {
    this.controlInbox.setHandler(handler);
  }

  onPeerFailure(handler: PeerFailureHandler): void {
    this.failureHandlers.push(handler);
    for (const [peer, failure] of this.failures) queueMicrotask(() => handler(peer, failure));
  }

  close(): Promise<void> {
    return this.closeAndReport().then(() => undefined);
  }

  /**
   * Closes once (idempotent) and says whether MPI_Finalize is safe now. With a peer already
   * failed there is nobody to wait for: the barrier is skipped and the close is not clean.
   */
  closeAndReport(): Promise<CloseResult> {
    this.closing ??= this.comm.close(this.failures.size > 0 ? 0 : this.ioTimeoutMs);
    return this.closing;
  }

  private async start(peer: number, tag: number, what: string, go: () => Promise<void>): Promise<void> {
    const invalid = invalidPeerOrTag(this.rank, this.size, peer, tag);
    if (invalid) throw invalid;
    if (this.closing) throw new ShutdownError(`transport of rank ${this.rank} is closed`);
    const failure = this.failures.get(peer);
    if (failure) throw failure;
    try {
      await go();
    } catch (error) {
      throw this.onOpError(error, { what, peer, ioTimeoutMs: this.ioTimeoutMs });
    }
  }

  /** A timeout or an MPI error leaves the peer's message stream in an unknown state: fail the peer. */
  private onOpError(error: unknown, context: OpContext & { peer: number }): RingReduceError {
    const translated = translateNativeError(error, context);
    const code = (error as { code?: string }).code;
    if (code === 'ETIMEDOUT' || code === 'EMPI') this.failPeer(context.peer, translated.message);
    return translated;
  }

  private failPeer(peer: number, cause: string): void {
    if (this.failures.has(peer) || this.closing) return;
    const failure = new PeerFailureError(`rank ${peer} (MPI): ${cause}`, peer);
    this.failures.set(peer, failure);
    for (const handler of this.failureHandlers) {
      try {
        handler(peer, failure);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
