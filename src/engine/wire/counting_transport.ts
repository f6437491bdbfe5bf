/**
 * The engine's transport seen through rr.stats(): every data and control message is counted
 * (one add each) on its way to or from the backend, which does the rest. A receive is counted
 * when it is posted, for the length it expects (the receiver always knows it: transport.ts);
 * should it fail, the job breaks anyway. A backend's native collectives (MPI's) pass the
 * backend's own buffers and are not seen here. Data-plane messages to and from ranks on other
 * hosts are counted once more apart (when the hosts are known: topology.ts).
 */
import type { ControlHandler, NativeCollectives, PeerFailureHandler, Transport } from '../../transport/transport.js';
import { nativeCollectivesOf } from '../../transport/transport.js';
import type { StatsWriter } from '../reporting/stats.js';

export class CountingTransport implements Transport {
  readonly rank: number;
  readonly size: number;
  /** The backend's native collectives, if it has them (executor.ts looks for this property). */
  readonly native: NativeCollectives | undefined;
  /** Whether each rank is on another host than this one. */
  private readonly remote: readonly boolean[];

  constructor(
    private readonly inner: Transport,
    private readonly stats: StatsWriter,
    /** The host of every rank (topology.ts); unset: not known, nothing counted as cross-host. */
    hosts?: readonly number[],
  ) {
    this.rank = inner.rank;
    this.size = inner.size;
    this.native = nativeCollectivesOf(inner);
    this.remote = Array.from({ length: inner.size }, (_, peer) => hosts !== undefined && hosts[peer] !== hosts[inner.rank]);
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    this.stats.sent(data.byteLength);
    if (this.remote[peer]) this.stats.crossHostSent(data.byteLength);
    return this.inner.send(peer, tag, data);
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    this.stats.received(into.byteLength);
    if (this.remote[peer]) this.stats.crossHostReceived(into.byteLength);
    return this.inner.recv(peer, tag, into);
  }

  sendControl(peer: number, payload: Uint8Array): Promise<void> {
    this.stats.controlSent(payload.byteLength);
    return this.inner.sendControl(peer, payload);
  }

  onControl(handler: ControlHandler): void {
    this.inner.onControl((peer, payload) => {
      this.stats.controlReceived(payload.byteLength);
      handler(peer, payload);
    });
  }

  onPeerFailure(handler: PeerFailureHandler): void {
    this.inner.onPeerFailure(handler);
  }

  setActive(active: boolean): void {
    this.inner.setActive?.(active);
  }

  holdProcess(hold: boolean): void {
    this.inner.holdProcess?.(hold);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
