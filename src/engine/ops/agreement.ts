/**
 * The building blocks of the specs' `agree`: each rank's request is checked against rank 0's,
 * field by field, and the first disagreement becomes a MismatchError that every rank receives
 * with the same message, naming the tensor, the two ranks and the two values.
 */
import type { Refusal, RequestBase } from './op_spec.js';

/** One field ranks must agree on: how to read it, and how to say it in a message. */
export interface FieldCheck<R> {
  /** Plural, as in "Mismatched data types for tensor 'x'". */
  what: string;
  /** The field's value as text: two requests agree when their texts are equal. */
  text(request: R): string;
}

export function shapeText(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

export function mismatch(name: string, what: string, rankA: number, a: string, rankB: number, b: string): Refusal {
  return {
    errorKind: 'MismatchError',
    message: `Mismatched ${what} for tensor '${name}': rank ${rankA} has ${a}, rank ${rankB} has ${b}.`,
  };
}

/** The first field on which a rank's request differs from `reference`'s (rank `referenceRank`), or undefined. */
export function firstMismatch<R>(
  name: string,
  requests: readonly R[],
  checks: readonly FieldCheck<NoInfer<R>>[],
  referenceRank = 0,
): Refusal | undefined {
  const reference = requests[referenceRank] as R;
  for (const [rank, request] of requests.entries()) {
    if (rank === referenceRank) continue;
    for (const check of checks) {
      const expected = check.text(reference);
      const actual = check.text(request);
      if (actual !== expected) return mismatch(name, check.what, referenceRank, expected, rank, actual);
    }
  }
  return undefined;
}

/**
 * The dtype on the wire, and so the compression too: a float32 tensor under compression 'fp16'
 * travels as 'float16', which the message spells out so that a rank without it sees why.
 */
export const kDTypeCheck: FieldCheck<RequestBase> = {
  what: 'data types',
  text: (r) => (r.dtype === 'float16' ? "float32 with compression 'fp16'" : r.dtype),
};
export const kShapeCheck: FieldCheck<RequestBase> = { what: 'shapes', text: (r) => shapeText(r.shape) };
export const kNdimCheck: FieldCheck<RequestBase> = {
  what: 'tensor ranks (number of dimensions)',
  text: (r) => `${r.shape.length}`,
};

/** The dimensions after the first (concatenating ops: allgather, gather, alltoall). */
export function trailingDimsCheck(op: string): FieldCheck<RequestBase> {
  return { what: `${op} dimensions after the first`, text: (r) => shapeText(r.shape.slice(1)) };
}

export function rootCheck(op: string): FieldCheck<{ root: number }> {
  return { what: `${op} roots`, text: (r) => `root ${r.root}` };
}
