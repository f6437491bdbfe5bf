/**
 * Which links of an in-process world (memory, sim) have broken. A link breaks both ways at once
 * and stays broken; the transports ask it before every operation with a peer.
 */
import { InvalidArgumentError, PeerFailureError } from '../core/errors.js';

export class BrokenLinks {
  private readonly broken: Uint8Array;

  constructor(private readonly size: number) {
    this.broken = new Uint8Array(size * size);
  }

  has(a: number, b: number): boolean {
    return this.broken[a * this.size + b] === 1;
  }

  /** Breaks the link between ranks a and b; false when it was broken already. */
  break(a: number, b: number): boolean {
    for (const rank of [a, b]) {
      if (!Number.isSafeInteger(rank) || rank < 0 || rank >= this.size) {
        throw new InvalidArgumentError(`rank must be in [0, ${this.size}), got ${rank}`);
      }
    }
    if (a === b) throw new InvalidArgumentError(`a link joins two different ranks, got ${a} twice`);
    if (this.has(a, b)) return false;
    this.broken[a * this.size + b] = 1;
    this.broken[b * this.size + a] = 1;
    return true;
  }

  /** The error for `rank` using its link to `peer`, when that link is broken. */
  refusal(rank: number, peer: number): PeerFailureError | undefined {
    return this.has(rank, peer) ? new PeerFailureError(`rank ${rank}: link to rank ${peer} is broken`, peer) : undefined;
  }
}
