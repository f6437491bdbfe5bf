/** addProcessSet and removeProcessSet on the caller's side: world collectives that define or remove a set. */
import type { AddProcessSetRequest, RemoveProcessSetRequest } from '../../engine/ops/registry.js';
import type { CallContext, Prepared } from '../call.js';

export function prepareAddProcessSet(ctx: CallContext, id: number, ranks: number[]): Prepared {
  const request: AddProcessSetRequest = {
    name: ctx.nameFor('addProcessSet', undefined),
    op: 'addProcessSet',
    dtype: 'uint8',
    shape: [0],
    id,
    ranks,
  };
  return { request, buffer: undefined, finish: () => undefined };
}

export function prepareRemoveProcessSet(ctx: CallContext, id: number): Prepared {
  const request: RemoveProcessSetRequest = {
    name: ctx.nameFor('removeProcessSet', undefined),
    op: 'removeProcessSet',
    dtype: 'uint8',
    shape: [0],
    id,
  };
  return { request, buffer: undefined, finish: () => undefined };
}
