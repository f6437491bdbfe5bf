/**
 * What ringrun knows of its ranks' start-up, read from rank 0's store (store_watch.ts): which
 * ranks called init() (init() puts the rank's address in the store before anything else), which
 * finished connecting to every other rank (the barrier's marks, rendezvous/mesh_barrier.ts),
 * and whether all did. Once the store is reached, rank 0 is in init() and waits for every rank;
 * so a rank that exits before calling init(), with any code, fails the job at once instead of
 * leaving the others waiting for the start-up timeout, and that timeout names the ranks that did
 * not call init() or did not finish connecting.
 *
 * A rank that exits 0 is checked against the store itself (is its address there?), not against
 * what the watch has seen so far: a job that connects and ends quickly is not mistaken for one
 * whose rank never called init(). Without the store (a command that never calls init(), a store
 * the launcher cannot reach) nothing is known, and nothing is decided from it.
 */
import type { RankExit } from './rank_process.js';

/** A rank not through start-up at the deadline, and at which step. */
export interface LateRank {
  rank: number;
  why: 'did not start' | 'did not call init()' | 'did not finish connecting';
}

export interface StartUpOptions {
  size: number;
  /** Whether `rank`'s address is in the store; undefined when the store cannot be asked. */
  calledInit(rank: number): Promise<boolean | undefined>;
  /**
   * Rank 0 exited with code 0 before the store was reached: resolves true when a rank then dials
   * the store's address (it is in init(), waiting for rank 0's store), false when none can be
   * told to (store_watch.ts, rankDialsStore). Unset: rank 0's exit is not checked.
   */
  rankDialsStore?(): Promise<boolean>;
  /** A rank exited with code 0 before calling init() while the others wait for it. */
  onExitedBeforeInit(rank: number): void;
}

export class StartUp {
  private reached = false;
  private connected = false;
  private readonly inInit = new Set<number>();
  private readonly finished = new Set<number>();
  /** Ranks that exited with code 0 before the job connected, not checked against the store yet. */
  private readonly unchecked: number[] = [];

  constructor(private readonly options: StartUpOptions) {}

  /** The launcher reached rank 0's store. */
  onStore(): void {
    this.reached = true;
    this.check();
  }

  /** `rank` called init(): its address is in the store. */
  onInit(rank: number): void {
    this.inInit.add(rank);
  }

  /** `rank` connected to every other rank. */
  onFinished(rank: number): void {
    this.finished.add(rank);
  }

  /** Every rank connected to every other: start-up is over. */
  onConnected(): void {
    this.connected = true;
  }

  /** Every exit of a rank (a failed one fails the job anyway). */
  onExit(exit: RankExit): void {
    if (this.connected || exit.spawnError !== undefined || exit.signal !== null || exit.code !== 0) return;
    if (exit.rank === 0 && !this.reached && this.options.rankDialsStore !== undefined) {
      // Rank 0 hosts the store: without it, a rank in init() can only be seen dialing its address.
      void this.options.rankDialsStore().then((dialed) => {
        if (dialed && !this.reached) this.options.onExitedBeforeInit(0);
      });
      return;
    }
    this.unchecked.push(exit.rank);
    this.check();
  }

  /** " before calling init()" for a rank known not to have called it while start-up runs, else "". */
  exitNote(rank: number): string {
    return this.reached && !this.connected && !this.inInit.has(rank) ? ' before calling init()' : '';
  }

  /**
   * The ranks start-up waits for (store reached, job not connected): those that did not call
   * init(), else those that did not finish connecting; undefined when not known.
   */
  late(): LateRank[] | undefined {
    if (!this.reached || this.connected) return undefined;
    const ranks = [...Array(this.options.size).keys()];
    const notInit = ranks.filter((rank) => !this.inInit.has(rank));
    if (notInit.length > 0) return notInit.map((rank) => ({ rank, why: 'did not call init()' }));
    return ranks.filter((rank) => !this.finished.has(rank)).map((rank) => ({ rank, why: 'did not finish connecting' }));
  }

  private check(): void {
    if (!this.reached) return;
    for (const rank of this.unchecked.splice(0)) {
      void this.options.calledInit(rank).then((called) => {
        if (called === false && !this.connected) this.options.onExitedBeforeInit(rank);
      });
    }
  }
}
