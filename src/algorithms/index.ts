/** The algorithm layer: pure functions of (transport, buffer, options). */

export { BufferPool, kDefaultMaxRetainedBytes } from '../core/buffer_pool.js';
export { allgather } from './allgather.js';
export { allreduce } from './allreduce.js';
export { alltoall } from './alltoall.js';
export { broadcast } from './broadcast.js';
export { bruckAllgather } from './bruck_allgather.js';
export {
  type AlgorithmOptions,
  kDefaultLatencyMaxBytes,
  kDefaultPipelineDepth,
  kDefaultSegmentBytes,
  type ResolvedOptions,
  resolveOptions,
} from './options.js';
export { rabenseifnerAllreduce } from './rabenseifner_allreduce.js';
export { rabenseifnerReduce } from './rabenseifner_reduce.js';
export { recursiveDoublingAllreduce } from './recursive_doubling.js';
export { recursiveHalvingReducescatter } from './recursive_halving.js';
export {
  divideInPlace,
  type ElementwiseOp,
  type KernelSelector,
  type ReduceKernel,
  reduceInto,
  selectKernel,
} from './reduce.js';
export { reduceToRoot } from './reduce_to_root.js';
export { createWasmKernels } from './reduce_wasm.js';
export { reducescatter } from './reducescatter.js';
export { ringAllgather } from './ring_allgather.js';
export { ringAllreduce } from './ring_allreduce.js';
export { ringReducescatter } from './ring_reducescatter.js';
export {
  type Blocks,
  blocksFromCounts,
  chunkLength,
  chunkOffset,
  evenBlocks,
  segmentCount,
  segmentLength,
} from './segments.js';
export { treeGather } from './tree_gather.js';
export { treeReduce } from './tree_reduce.js';
export { treeScatter } from './tree_scatter.js';
