/**
 * The error classes of ringreduce. Every error thrown or rejected by the library is a
 * RingReduceError; the subclass says what went wrong and whether the job can go on
 * (see docs/errors.md). Each class has a stable `code` (Node's convention: branch on
 * `error.code === 'ERR_RR_TIMEOUT'`, not on the message), derived from the class, so it
 * survives every boundary the class does (toErrorRecord/fromErrorRecord).
 */

/** The `code` of each error class: stable, append only. */
export const kErrorCodes = {
  RingReduceError: 'ERR_RR_ERROR',
  InvalidArgumentError: 'ERR_RR_INVALID_ARGUMENT',
  MismatchError: 'ERR_RR_MISMATCH',
  PeerFailureError: 'ERR_RR_PEER_FAILURE',
  TimeoutError: 'ERR_RR_TIMEOUT',
  ShutdownError: 'ERR_RR_SHUTDOWN',
  ProtocolError: 'ERR_RR_PROTOCOL',
} as const;

/**
 * The `code` of a ringreduce error, one per class ('ERR_RR_TIMEOUT' for TimeoutError, ...): branch
 * on it rather than on the message, which may change.
 * @example if (error instanceof rr.RingReduceError && error.code === 'ERR_RR_MISMATCH') console.error(error.message);
 */
export type ErrorCode = (typeof kErrorCodes)[keyof typeof kErrorCodes];

/**
 * The base class of every error ringreduce throws or rejects with; thrown as such for failures
 * none of the subclasses describes (a `...Sync` call where the thread may not block, say). Check
 * `instanceof RingReduceError`, or `code` (docs/errors.md lists what each means and what to do).
 */
export class RingReduceError extends Error {
  override name = 'RingReduceError';
  /** What kind of failure this is, stable across releases: see kErrorCodes and docs/errors.md. */
  readonly code: ErrorCode = kErrorCodes.RingReduceError;
}

/** A bad argument or option. Names the argument. Recoverable: nothing was sent. */
export class InvalidArgumentError extends RingReduceError {
  override name = 'InvalidArgumentError';
  override readonly code: ErrorCode = kErrorCodes.InvalidArgumentError;
}

/** Ranks disagreed about a collective (dtype, shape, op, root). Same message on every rank. Recoverable. */
export class MismatchError extends RingReduceError {
  override name = 'MismatchError';
  override readonly code: ErrorCode = kErrorCodes.MismatchError;
}

/** A peer rank died or its connection broke. Names the rank. Not recoverable: the job is broken. */
export class PeerFailureError extends RingReduceError {
  override name = 'PeerFailureError';
  override readonly code: ErrorCode = kErrorCodes.PeerFailureError;
  /**
   * Made by the engine when a peer fails; a program has no need to make one.
   * @param message what failed, naming the peer
   * @param peerRank the failed peer's rank, when one is known
   */
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
  override readonly code: ErrorCode = kErrorCodes.TimeoutError;
}

/** The runtime was shut down (or not initialised) while the call was pending. */
export class ShutdownError extends RingReduceError {
  override name = 'ShutdownError';
  override readonly code: ErrorCode = kErrorCodes.ShutdownError;
}

/** A peer sent bytes that break the wire protocol. Not recoverable for that connection. */
export class ProtocolError extends RingReduceError {
  override name = 'ProtocolError';
  override readonly code: ErrorCode = kErrorCodes.ProtocolError;
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
