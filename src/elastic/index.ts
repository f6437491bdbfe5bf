/** Elastic training (docs/elastic.md): `rr.elastic.ObjectState`, `rr.elastic.run`. */
export { run } from './run.js';
export { HostsUpdatedInterrupt, ObjectState, type StateOptions } from './state.js';
