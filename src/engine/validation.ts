/**
 * The coordinator's agreement check: once every rank has reported a name, the requests must
 * agree on op, dtype, reduce op, shape (allreduce, broadcast), trailing dimensions (allgather)
 * and root (broadcast). The first disagreement becomes a MismatchError response that every rank
 * receives with the same message, naming the tensor, the two ranks and the two values.
 */
import type { ErrorResponse, ExecuteResponse, Request, Response } from './messages.js';

function shapeText(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

function sameShape(a: readonly number[], b: readonly number[], from = 0): boolean {
  if (a.length !== b.length) return false;
  for (let i = from; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function mismatch(name: string, what: string, rankA: number, a: string, rankB: number, b: string): ErrorResponse {
  return {
    kind: 'error',
    names: [name],
    errorKind: 'MismatchError',
    message: `Mismatched ${what} for tensor '${name}': rank ${rankA} has ${a}, rank ${rankB} has ${b}.`,
  };
}

/** Checks one rank's request against rank 0's; undefined when they agree. */
function compare(name: string, first: Request, rank: number, other: Request): ErrorResponse | undefined {
  if (other.op !== first.op) return mismatch(name, 'collective operations', 0, first.op, rank, other.op);
  if (other.dtype !== first.dtype) return mismatch(name, 'data types', 0, first.dtype, rank, other.dtype);
  switch (first.op) {
    case 'allreduce':
      if (other.reduceOp !== first.reduceOp) {
        return mismatch(name, 'reduce ops', 0, first.reduceOp, rank, other.reduceOp);
      }
      if (!sameShape(first.shape, other.shape)) {
        return mismatch(name, 'shapes', 0, shapeText(first.shape), rank, shapeText(other.shape));
      }
      return undefined;
    case 'broadcast':
      if (other.root !== first.root) {
        return mismatch(name, 'broadcast roots', 0, `root ${first.root}`, rank, `root ${other.root}`);
      }
      if (!sameShape(first.shape, other.shape)) {
        return mismatch(name, 'shapes', 0, shapeText(first.shape), rank, shapeText(other.shape));
      }
      return undefined;
    case 'allgather':
      if (other.shape.length !== first.shape.length) {
        return mismatch(name, 'tensor ranks (number of dimensions)', 0, `${first.shape.length}`, rank, `${other.shape.length}`);
      }
      if (!sameShape(first.shape, other.shape, 1)) {
        return mismatch(
          name,
          'allgather dimensions after the first',
          0,
          shapeText(first.shape.slice(1)),
          rank,
          shapeText(other.shape.slice(1)),
        );
      }
      return undefined;
    case 'barrier':
      return undefined;
  }
}

/** Allgather: every rank that passed option 'out' must have passed the gathered size. */
function checkAllgatherOuts(name: string, requests: readonly Request[], firstDims: readonly number[]): ErrorResponse | undefined {
  const rowSize = (requests[0] as Request).shape.slice(1).reduce((a, b) => a * b, 1);
  const total = firstDims.reduce((a, b) => a + b, 0) * rowSize;
  for (const [rank, request] of requests.entries()) {
    if (request.outLength === undefined || request.outLength === total) continue;
    return {
      kind: 'error',
      names: [name],
      errorKind: 'InvalidArgumentError',
      message:
        `Wrong 'out' for allgather of tensor '${name}': rank ${rank}'s has ${request.outLength} elements, ` +
        `the result has ${total} (first dimensions ${shapeText(firstDims)} × ${rowSize} elements per row).`,
    };
  }
  return undefined;
}

/** The response for `name` once every rank's request (indexed by rank) has arrived. */
export function negotiate(name: string, requests: readonly Request[]): Response {
  const first = requests[0];
  if (first === undefined) throw new Error(`negotiate('${name}') called with no requests`);
  for (let rank = 1; rank < requests.length; rank++) {
    const other = requests[rank];
    if (other === undefined) throw new Error(`negotiate('${name}') is missing rank ${rank}`);
    const error = compare(name, first, rank, other);
    if (error) return error;
  }
  const firstDims = first.op === 'allgather' ? requests.map((r) => r.shape[0] ?? 0) : [];
  if (first.op === 'allgather') {
    const error = checkAllgatherOuts(name, requests, firstDims);
    if (error) return error;
  }
  const response: ExecuteResponse = {
    kind: 'execute',
    names: [name],
    op: first.op,
    dtype: first.dtype,
    reduceOp: first.reduceOp,
    root: first.root,
    firstDims,
  };
  return response;
}
