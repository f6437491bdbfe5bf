/**
 * A view of the transport over a subset of its ranks, numbered inside the subset, so the
 * algorithms (which know nothing but `rank` and `size`) run on a subset unchanged. Peer p of the
 * view is rank `ranks[p]` of the transport below. Only the data plane is seen through it.
 *
 * Used for a process set's view of the job (engine: the set's tags keep sets that share ranks
 * apart, engine/wire/tags.ts) and for the hosts' local and cross-host groups of a hierarchical
 * collective (algorithms/hierarchy.ts: its phases share the collective's tag).
 */
import { ProtocolError } from '../core/errors.js';
import type { ControlHandler, PeerFailureHandler, Transport } from './transport.js';

export class SubgroupTransport implements Transport {
  readonly rank: number;
  readonly size: number;

  constructor(
    private readonly world: Transport,
    /** The members, ranks of `world` in the view's order. */
    private readonly ranks: readonly number[],
  ) {
    this.rank = ranks.indexOf(world.rank);
    this.size = ranks.length;
    if (this.rank < 0) throw new Error(`rank ${world.rank} is not in the group [${ranks.join(', ')}]`);
  }

  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    return this.world.send(this.global(peer), tag, data);
  }

  recv(peer: number, tag: number, into: Uint8Array): Promise<void> {
    return this.world.recv(this.global(peer), tag, into);
  }

  sendControl(): Promise<void> {
    return Promise.reject(new ProtocolError('a subgroup sends control messages through the engine, not its view'));
  }

  onControl(_handler: ControlHandler): void {}

  onPeerFailure(_handler: PeerFailureHandler): void {}

  /** The view does not own the links. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private global(peer: number): number {
    // An out-of-range peer maps to an invalid rank, which the world transport refuses with the usual error.
    return this.ranks[peer] ?? -1;
  }
}
