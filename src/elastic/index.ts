/**
 * Elastic training (docs/elastic.md), as Horovod's `hvd.elastic`: a job started with
 * `ringrun --elastic` goes on when workers fail or join. `ObjectState` holds what the training
 * loop must not lose (committed, restored, synced from rank 0); `run` wraps the loop, restarting
 * it from the last commit after each change of membership.
 * @example
 * const state = new rr.elastic.ObjectState({ epoch: 0, weights });
 * await rr.elastic.run(state, async () => {
 *   for (; state.epoch < 10; state.epoch++) { await trainEpoch(state.weights); await state.commit(); }
 * });
 * @module
 */
export { run } from './run.js';
export { HostsUpdatedInterrupt, ObjectState, type StateOptions } from './state.js';
