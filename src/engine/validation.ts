/**
 * The coordinator's agreement check: once every rank has reported a name, the requests must be of
 * one operation, and then agree as that operation's spec requires (ops/: dtype, shape, reduce op,
 * root, ...). The first disagreement becomes a MismatchError response that every rank receives
 * with the same message, naming the tensor, the two ranks and the two values.
 */
import type { ErrorResponse, Request, Response } from './messages.js';
import { mismatch } from './ops/agreement.js';
import { isRefusal } from './ops/op_spec.js';
import { specOf } from './ops/registry.js';

/** The response for `name` once every rank's request (indexed by rank) has arrived. */
export function negotiate(name: string, requests: readonly Request[]): Response {
  const first = requests[0];
  if (first === undefined) throw new Error(`negotiate('${name}') called with no requests`);
  for (let rank = 1; rank < requests.length; rank++) {
    const other = requests[rank];
    if (other === undefined) throw new Error(`negotiate('${name}') is missing rank ${rank}`);
    if (other.op !== first.op) return refused(name, mismatch(name, 'collective operations', 0, first.op, rank, other.op));
  }
  const verdict = specOf(first).agree(name, requests as readonly (typeof first)[]);
  if (isRefusal(verdict)) return refused(name, verdict);
  return { kind: 'execute', names: [name], request: verdict.request, counts: verdict.counts };
}

function refused(name: string, refusal: { errorKind: ErrorResponse['errorKind']; message: string }): ErrorResponse {
  return { kind: 'error', names: [name], errorKind: refusal.errorKind, message: refusal.message };
}
