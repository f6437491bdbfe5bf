/**
 * The error classes of ringreduce. Every error thrown or rejected by the library is a
 * RingReduceError; the subclass says what went wrong and whether the job can go on
 * (see docs/errors.md).
 */

export class RingReduceError extends Error {
  override name = 'RingReduceError';
}

/** A bad argument or option. Names the argument. Recoverable: nothing was sent. */
export class InvalidArgumentError extends RingReduceError {
  override name = 'InvalidArgumentError';
}

/** Ranks disagreed about a collective (dtype, shape, op, root). Same message on every rank. Recoverable. */
export class MismatchError extends RingReduceError {
  override name = 'MismatchError';
}

/** A peer rank died or its connection broke. Names the rank. Not recoverable: the job is broken. */
export class PeerFailureError extends RingReduceError {
  override name = 'PeerFailureError';
  constructor(
    message: string,
    readonly peerRank?: number,
  ) {
    super(message);
  }
}

/** A wait passed its deadline. Names what was waited for and the ranks missing. */
export class TimeoutError extends RingReduceError {
  override name = 'TimeoutError';
}

/** The runtime was shut down (or not initialised) while the call was pending. */
export class ShutdownError extends RingReduceError {
  override name = 'ShutdownError';
}

/** A peer sent bytes that break the wire protocol. Not recoverable for that connection. */
export class ProtocolError extends RingReduceError {
  override name = 'ProtocolError';
}

const kClasses = {
  RingReduceError,
  InvalidArgumentError,
  MismatchError,
  PeerFailureError,
  TimeoutError,
  ShutdownError,
  ProtocolError,
} as const;

export type ErrorClassName = keyof typeof kClasses;

/** The error classes in a fixed order: an index is a class's code on the wire (append only). */
export const kErrorClassNames = Object.keys(kClasses) as ErrorClassName[];

/** A plain record of an error, for crossing thread and network boundaries. */
export interface ErrorRecord {
  kind: ErrorClassName;
  message: string;
  peerRank?: number;
}

export function toErrorRecord(error: unknown): ErrorRecord {
  if (error instanceof RingReduceError) {
    const kind = (error.name in kClasses ? error.name : 'RingReduceError') as ErrorClassName;
    const record: ErrorRecord = { kind, message: error.message };
    if (error instanceof PeerFailureError && error.peerRank !== undefined) record.peerRank = error.peerRank;
    return record;
  }
  const message = error instanceof Error ? error.message : String(error);
  return { kind: 'RingReduceError', message };
}

export function fromErrorRecord(record: ErrorRecord): RingReduceError {
  if (record.kind === 'PeerFailureError') return new PeerFailureError(record.message, record.peerRank);
  const Ctor = kClasses[record.kind] ?? RingReduceError;
  return new Ctor(record.message);
}
