/**
 * The transport of a job of size 1: there is no peer, and the algorithms never call it (with
 * one rank every collective is a local no-op), so each method says so if it ever is called.
 */
import { RingReduceError } from '../core/errors.js';
import type { Transport } from './transport.js';

function noPeer(): RingReduceError {
  return new RingReduceError('a job of size 1 has no peer to communicate with');
}

export class SoloTransport implements Transport {
  readonly rank = 0;
  readonly size = 1;
  send(): Promise<void> {
    return Promise.reject(noPeer());
  }
  recv(): Promise<void> {
    return Promise.reject(noPeer());
  }
  sendControl(): Promise<void> {
    return Promise.reject(noPeer());
  }
  onControl(): void {}
  onPeerFailure(): void {}
  close(): Promise<void> {
    return Promise.resolve();
  }
}
