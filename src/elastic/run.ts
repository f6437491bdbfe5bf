/**
 * elastic.run (Horovod's hvd.elastic.run): runs the training function, and when the membership
 * changes (a rank failed: its peers' collectives reject with PeerFailureError; or new workers
 * wait: a commit throws HostsUpdatedInterrupt), the surviving and new ranks form the next
 * generation's job, go back to the last commit, take rank 0's values, call the reset callbacks
 * and run the function again. A rank joining a running job starts the same way: it syncs from
 * rank 0 and calls the reset callbacks.
 */
import { PeerFailureError } from '../core/errors.js';
import { HostsUpdatedInterrupt, type State } from './state.js';

/**
 * Runs `fn(state)` until it returns, through changes of membership.
 * @example await rr.elastic.run(state, async (state) => { for (; state.step < n; state.step++) { ...; await state.commit(); } });
 */
export async function run<T extends object, R>(state: State<T> & T, fn: (state: State<T> & T) => Promise<R>): Promise<R> {
  const rr = state.runtime;
  // A worker the launcher added to a running job: its membership changed as it arrived.
  let changed = rr.generation() > 1;
  let rolledBack = false;
  for (;;) {
    try {
      // A failure during this reset is handled like any other: the next generation tries again.
      if (rolledBack) await state.restore();
      await state.sync();
      if (changed) await state.reset();
      return await fn(state);
    } catch (error) {
      if (!(error instanceof PeerFailureError) && !(error instanceof HostsUpdatedInterrupt)) throw error;
      await rr.reform();
      changed = true;
      rolledBack = true;
    }
  }
}
