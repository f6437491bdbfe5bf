/**
 * The coordinator's agreement check: once every rank has reported a name, the requests must be of
 * one operation and one group (or none), and then agree as that operation's spec requires (ops/: dtype, shape, reduce op,
 * root, ...). The first disagreement becomes a MismatchError response that every rank receives
 * with the same message, naming the tensor, the two ranks and the two values.
 */

import { mismatch } from '../ops/agreement.js';
import { isRefusal } from '../ops/op_spec.js';
import { specOf } from '../ops/registry.js';
import type { ErrorResponse, Request, Response } from '../wire/messages.js';

/**
 * The response for `name` once every rank's request (indexed by rank) has arrived, or, for the
 * ranks in `joined` (ops/join.ts), is stood in for: their slots are empty, and they take part as
 * the spec's `joined` support says (or the collective fails while they have joined).
 */
export function negotiate(name: string, submitted: readonly (Request | undefined)[], joined: readonly number[] = []): Response {
  const present = submitted.find((r) => r !== undefined);
  if (present === undefined) throw new Error(`negotiate('${name}') called with no requests`);
  // A joined rank's slot holds the first request: it agrees by construction.
  const requests = submitted.map((r, rank) => {
    if (r !== undefined) return r;
    if (!joined.includes(rank)) throw new Error(`negotiate('${name}') is missing rank ${rank}`);
    return present;
  });
  const first = requests[0] as Request;
  for (let rank = 1; rank < requests.length; rank++) {
    const other = requests[rank] as Request;
    if (other.op !== first.op) return refused(name, mismatch(name, 'collective operations', 0, first.op, rank, other.op));
    if (groupText(other) !== groupText(first)) {
      return refused(name, mismatch(name, 'groups', 0, groupText(first), rank, groupText(other)));
    }
  }
  const spec = specOf(first);
  let verdict = spec.agree(name, requests as readonly (typeof first)[]);
  if (isRefusal(verdict)) return refused(name, verdict);
  if (joined.length > 0) {
    verdict = spec.joined
      ? spec.joined.adjust(name, verdict, joined)
      : {
          errorKind: 'InvalidArgumentError',
          message: `${first.op} of tensor '${name}' cannot run while ranks ${joined.join(', ')} have joined (they have no data for it).`,
        };
    if (isRefusal(verdict)) return refused(name, verdict);
    return { kind: 'execute', names: [name], request: verdict.request, counts: verdict.counts, joined: [...joined] };
  }
  return { kind: 'execute', names: [name], request: verdict.request, counts: verdict.counts };
}

function groupText(request: Request): string {
  const group = request.group;
  return group ? `member ${group.index} of group '${group.name}' of ${group.size}` : 'no group';
}

function refused(name: string, refusal: { errorKind: ErrorResponse['errorKind']; message: string }): ErrorResponse {
  return { kind: 'error', names: [name], errorKind: refusal.errorKind, message: refusal.message };
}
