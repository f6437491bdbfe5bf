/** The algorithm layer: pure functions of (transport, buffer, options). */

export { BufferPool, kDefaultMaxRetainedBytes } from '../core/buffer_pool.js';
export { allreduce } from './allreduce.js';
export { broadcast } from './broadcast.js';
export {
  type AlgorithmOptions,
  kDefaultLatencyMaxBytes,
  kDefaultPipelineDepth,
  kDefaultSegmentBytes,
  type ResolvedOptions,
  resolveOptions,
} from './options.js';
export { recursiveDoublingAllreduce } from './recursive_doubling.js';
export {
  divideInPlace,
  type ElementwiseOp,
  type KernelSelector,
  type ReduceKernel,
  reduceInto,
  selectKernel,
} from './reduce.js';
export { createWasmKernels } from './reduce_wasm.js';
export { ringAllgather } from './ring_allgather.js';
export { ringAllreduce } from './ring_allreduce.js';
export {
  type Blocks,
  blocksFromCounts,
  chunkLength,
  chunkOffset,
  evenBlocks,
  segmentCount,
  segmentLength,
} from './segments.js';
