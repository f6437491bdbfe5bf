/**
 * addProcessSet and removeProcessSet: collectives of the world that change the process sets. Every
 * rank calls them with the same set (the facade numbers sets in call order, the same on every
 * rank); they act at their agreed place in the world's order (Membership: the engine defines or
 * removes the set), so every rank sees the same sets at the same point. Never cached.
 */
import { readCounts, writeCounts } from '../wire/wire.js';
import { type FieldCheck, firstMismatch } from './agreement.js';
import type { OpSpec, RequestBase } from './op_spec.js';

export interface AddProcessSetRequest extends RequestBase<'addProcessSet'> {
  /** The set's id: 1, 2, ... in the order sets are added (0 is the world). */
  id: number;
  /** Its members, job ranks in set order. */
  ranks: number[];
}

export interface RemoveProcessSetRequest extends RequestBase<'removeProcessSet'> {
  id: number;
}

const kSetCheck: FieldCheck<AddProcessSetRequest> = {
  what: 'process sets',
  text: (r) => `ranks [${r.ranks.join(', ')}] as set ${r.id}`,
};
const kIdCheck: FieldCheck<RemoveProcessSetRequest> = { what: 'process sets to remove', text: (r) => `set ${r.id}` };

export const addProcessSetOp: OpSpec<AddProcessSetRequest> = {
  op: 'addProcessSet',
  write(w, r) {
    w.u32(r.id);
    writeCounts(w, r.ranks);
  },
  read: (r, base) => ({ ...base, id: r.u32('process set'), ranks: readCounts(r, 'process set ranks') }),
  agree: (name, requests) =>
    firstMismatch(name, requests, [kSetCheck]) ?? { request: requests[0] as AddProcessSetRequest, counts: [] },
  cacheable: false,
  async execute(ctx, { request }, entries) {
    ctx.membership?.define(request.id, request.ranks);
    return entries.map(() => ({}));
  },
};

export const removeProcessSetOp: OpSpec<RemoveProcessSetRequest> = {
  op: 'removeProcessSet',
  write: (w, r) => w.u32(r.id),
  read: (r, base) => ({ ...base, id: r.u32('process set') }),
  agree: (name, requests) =>
    firstMismatch(name, requests, [kIdCheck]) ?? { request: requests[0] as RemoveProcessSetRequest, counts: [] },
  cacheable: false,
  async execute(ctx, { request }, entries) {
    await ctx.membership?.remove(request.id);
    return entries.map(() => ({}));
  },
};
