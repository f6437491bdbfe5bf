/**
 * The engine's transport seen through rr.stats(): every data and control message is counted
 * (one add each) on its way to or from the backend, which does the rest. A receive is counted
 * when it is posted, for the length it expects (the receiver always knows it: transport.ts);
 * should it fail, the job breaks anyway. A backend's native collectives (MPI's) pass the
 * backend's own buffers and are not seen here.
 */
import type { ControlHandler, NativeCollectives, PeerFailureHandler, Transport } from '../transport/transport.js';
import { nativeCollectivesOf } from '../transport/transport.js';
import type { StatsWriter } from './stats.js';

export class CountingTransport implements Transport {
  readonly rank: number;
  readonly size: number;
  /** The backend's native collectives, if it has them (executor.ts looks for this property). */
  readonly native: NativeCollectives | undefined;

  constructor(
    private readonly inner: Transport,
    private readonly stats: StatsWriter,
  ) {
    this.rank = inner.rank;
    this.size = inner.size;
    this.native = nativeCollectivesOf(inner);
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    this.stats.sent(data.byteLength);
    return this.inner.send(peer, tag, data);
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    this.stats.received(into.byteLength);
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

  close(): Promise<void> {
    return this.inner.close();
  }
}
