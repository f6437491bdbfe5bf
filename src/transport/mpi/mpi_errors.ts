/**
 * Turns the addon's rejections (NativeError codes) into ringreduce's error classes, and its
 * argument checks (TypeError, RangeError, thrown before MPI is called) into InvalidArgumentError.
 */
import {
  InvalidArgumentError,
  PeerFailureError,
  ProtocolError,
  type RingReduceError,
  RingReduceError as RingReduceErrorClass,
  ShutdownError,
  TimeoutError,
} from '../../core/errors.js';
import type { NativeError } from './native_binding.js';

/** What failed, for the message: "recv from rank 1 with tag 7". */
export interface OpContext {
  what: string;
  peer?: number;
  ioTimeoutMs: number;
}

export function translateNativeError(error: unknown, context: OpContext): RingReduceError {
  if (error instanceof RingReduceErrorClass) return error;
  const native = error as Partial<NativeError>;
  const detail = native.message ?? String(error);
  switch (native.code) {
    case 'ETIMEDOUT':
      return new TimeoutError(`${context.what} did not complete within ${context.ioTimeoutMs} ms (MPI)`);
    case 'ETRUNCATED':
    case 'ESHORT':
      return new ProtocolError(`${context.what}: ${detail}`);
    case 'ECLOSED':
      return new ShutdownError(`${context.what}: the MPI transport was closed`);
    case 'EMPI':
      return new PeerFailureError(`${context.what} failed in MPI: ${detail}`, context.peer);
    default:
      // The addon checks its arguments with TypeError / RangeError (before anything reaches MPI).
      if (error instanceof TypeError || error instanceof RangeError)
        return new InvalidArgumentError(`${context.what}: ${detail}`);
      return new RingReduceErrorClass(`${context.what}: ${detail}`);
  }
}
