/**
 * A process set's view of the transport: ranks numbered inside the set, so the algorithms (which
 * know nothing but `rank` and `size`) run on a subset of the job unchanged. Peer p of the set is
 * global rank `ranks[p]`. Only the data plane is seen through it; tags come from the set's own
 * tag space (tags.ts), so sets that share ranks never match each other's messages.
 */
import { ProtocolError } from '../core/errors.js';
import type { ControlHandler, PeerFailureHandler, Transport } from '../transport/transport.js';

export class SetTransport implements Transport {
  readonly rank: number;
  readonly size: number;

  constructor(
    private readonly world: Transport,
    /** The set's members, global ranks in set order. */
    private readonly ranks: readonly number[],
  ) {
    this.rank = ranks.indexOf(world.rank);
    this.size = ranks.length;
    if (this.rank < 0) throw new Error(`rank ${world.rank} is not in the process set [${ranks.join(', ')}]`);
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    return this.world.send(this.global(peer), tag, data);
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    return this.world.recv(this.global(peer), tag, into);
  }

  sendControl(): Promise<void> {
    return Promise.reject(new ProtocolError('a process set sends control messages through the engine, not its view'));
  }

  onControl(_handler: ControlHandler): void {}

  onPeerFailure(_handler: PeerFailureHandler): void {}

  /** The set does not own the job's links. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private global(peer: number): number {
    // An out-of-range peer maps to an invalid rank, which the world transport refuses with the usual error.
    return this.ranks[peer] ?? -1;
  }
}
