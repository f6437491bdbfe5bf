/**
 * The transport of a job of size 1: there is no peer, and the algorithms never call it (with
 * one rank every collective is a local no-op). Every peer is invalid, so each operation
 * rejects the way the contract says for one (InvalidArgumentError), or with ShutdownError once
 * closed; nothing is ever pending.
 */
import { InvalidArgumentError, ShutdownError } from '../core/errors.js';
import { type BackendFactory, handleOf } from './backend.js';
import { invalidPeerOrTag, type Transport } from './transport.js';

export class SoloTransport implements Transport {
  readonly rank = 0;
  readonly size = 1;
  private closed = false;

  send(peer: number, tag: number): Promise<void> {
    return Promise.reject(this.refuse(peer, tag));
  }
  recv(peer: number, tag: number): Promise<void> {
    return Promise.reject(this.refuse(peer, tag));
  }
  sendControl(peer: number): Promise<void> {
    return Promise.reject(this.refuse(peer, 0));
  }
  onControl(): void {}
  onPeerFailure(): void {}
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private refuse(peer: number, tag: number): Error {
    if (this.closed) return new ShutdownError('transport of rank 0 is closed');
    return invalidPeerOrTag(this.rank, this.size, peer, tag) ?? new InvalidArgumentError('a job of size 1 has no peer');
  }
}

/** The solo backend: chosen for a job of one rank (backends.ts). */
export const soloBackend: BackendFactory = async (config) => {
  if (config.size !== 1) throw new InvalidArgumentError(`the solo backend runs a job of size 1, not ${config.size}`);
  return handleOf(new SoloTransport());
};
