/**
 * join: a rank that has no more data calls it (Horovod's hvd.join). Until every member of the set
 * has joined, a joined rank still takes part in the collectives the others submit, as a neutral
 * contributor (each spec's `joined` support: the op's identity, zero rows, ...); rank 0's
 * coordinator treats it as having submitted every name (join_state.ts). The join itself completes
 * once every member has called it, and resolves everywhere to the rank that joined last.
 */
import type { OpSpec, RequestBase } from './op_spec.js';

export type JoinRequest = RequestBase<'join'>;

export const joinOp: OpSpec<JoinRequest> = {
  op: 'join',
  write: () => {},
  read: (_r, base) => base,
  // The coordinator puts the last rank to join in the counts (join_state.ts).
  agree: (_name, requests) => ({ request: requests[0] as JoinRequest, counts: [] }),
  cacheable: false,
  execute: async (_ctx, { counts }, entries) => entries.map(() => ({ counts })),
};
