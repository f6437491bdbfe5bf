/**
 * Which ranks of a set have joined (ops/join.ts), as rank 0's coordinator sees it: a joined rank
 * counts as having submitted every name, so a name is complete once every rank that has not
 * joined has submitted it. The join completes when every rank has joined; it resolves to the rank
 * whose join arrived last (Horovod's convention), and the set goes back to normal.
 */
export class JoinState {
  private readonly joined = new Set<number>();
  private last = -1;

  constructor(private readonly size: number) {}

  /** Whether some rank has joined: the set is in join mode. */
  get active(): boolean {
    return this.joined.size > 0;
  }

  /** The joined ranks, ascending. */
  get ranks(): number[] {
    return [...this.joined].sort((a, b) => a - b);
  }

  add(rank: number): void {
    this.joined.add(rank);
    this.last = rank;
  }

  has(rank: number): boolean {
    return this.joined.has(rank);
  }

  /** Whether a name submitted by the ranks set in `submitted` (indexed by rank) can run now. */
  complete(submitted: readonly unknown[]): boolean {
    for (let rank = 0; rank < this.size; rank++) if (submitted[rank] === undefined && !this.joined.has(rank)) return false;
    return true;
  }

  /** The joined ranks that did not submit a name (they will stand in for it). */
  standIns(submitted: readonly unknown[]): number[] {
    return this.ranks.filter((rank) => submitted[rank] === undefined);
  }

  /** Every rank has joined: the last one, and the set leaves join mode. */
  finish(): number {
    const last = this.last;
    this.joined.clear();
    this.last = -1;
    return last;
  }
}
