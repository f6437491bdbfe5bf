/**
 * barrier: no data. Negotiation itself is the barrier: the response exists only once every rank
 * has asked for the name, so executing it is a no-op. Cached like any named collective.
 */
import type { OpSpec, RequestBase } from './op_spec.js';

export type BarrierRequest = RequestBase<'barrier'>;

export const barrierOp: OpSpec<BarrierRequest> = {
  op: 'barrier',
  write: () => {},
  read: (_r, base) => base,
  agree: (_name, requests) => ({ request: requests[0] as BarrierRequest, counts: [] }),
  cacheable: true,
  // A joined rank has arrived, as far as a barrier is concerned.
  joined: { adjust: (_name, agreement) => agreement, standIn: ({ request }) => ({ request, buffer: undefined }) },
  execute: async (_ctx, _agreement, entries) => entries.map(() => ({})),
};
