/**
 * ringreduce: collective communication and data-parallel training for Node.js.
 * @example
 * import * as rr from 'ringreduce';
 * await rr.init();
 * const sum = await rr.allreduce(new Float32Array([rr.rank()]));
 * await rr.shutdown();
 * @module
 */

// The module functions (rr.init, rr.allreduce, ...) and the option types of every collective.
export * from './api/default_runtime.js';
export { ProcessSet } from './api/process_set.js';
export { RingReduce } from './api/runtime.js';
export type { Config, InitOptions } from './core/config.js';
export {
  type ErrorCode,
  InvalidArgumentError,
  kErrorCodes,
  MismatchError,
  PeerFailureError,
  ProtocolError,
  RingReduceError,
  ShutdownError,
  TimeoutError,
} from './core/errors.js';
export type {
  AllreduceOp,
  Compression,
  DType,
  ReduceOp,
  ShapedTensor,
  SharedTypedArray,
  Splits,
  TensorLike,
  TypedArray,
} from './core/types.js';
export * as elastic from './elastic/index.js';
