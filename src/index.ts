/** ringreduce: collective communication and data-parallel training for Node.js. */

export {
  allgather,
  allgatherSync,
  allreduce,
  allreduceSync,
  barrier,
  barrierSync,
  broadcast,
  broadcastSync,
  crossRank,
  crossSize,
  init,
  isInitialized,
  localRank,
  localSize,
  rank,
  runtime,
  shutdown,
  size,
} from './api/default_runtime.js';
export {
  type AllgatherOptions,
  type AllreduceOptions,
  type BarrierOptions,
  type BroadcastOptions,
  type Result,
  RingReduce,
} from './api/runtime.js';
export type { Config, InitOptions } from './core/config.js';
export {
  InvalidArgumentError,
  MismatchError,
  PeerFailureError,
  ProtocolError,
  RingReduceError,
  ShutdownError,
  TimeoutError,
} from './core/errors.js';
export type { DType, ReduceOp, ShapedTensor, TensorLike, TypedArray } from './core/types.js';
