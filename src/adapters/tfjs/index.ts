/**
 * ringreduce/tfjs: data-parallel training for TensorFlow.js. Public exports only.
 * `@tensorflow/tfjs` is a peer dependency: the adapter uses the application's copy, so its
 * tensors, optimizers and models are the ones the application creates.
 *
 * One statement besides the exports: importing the adapter keeps Node's handling of uncaught
 * errors when TF.js's wasm backend starts (node_error_handling.ts says why).
 * @module
 */

import { keepNodeErrorHandling } from './node_error_handling.js';

keepNodeErrorHandling();

export { BroadcastGlobalVariablesCallback } from './broadcast_callback.js';
export {
  type BroadcastModelOptions,
  broadcastModel,
  broadcastOptimizerState,
  broadcastVariables,
} from './broadcast_model.js';
export { type BroadcastManyOptions, broadcastObject, broadcastTensors } from './broadcast_tensors.js';
export {
  checkpointInfo,
  fileLoadHandler,
  fileSaveHandler,
  loadModelFromDir,
  ModelCheckpointCallback,
  type ModelCheckpointOptions,
  type SaveModelOptions,
  saveModelToDir,
} from './checkpoint.js';
export {
  allgather,
  allgatherSync,
  allreduce,
  allreduceSync,
  alltoall,
  alltoallSync,
  broadcast,
  broadcastSync,
  gather,
  gatherSync,
  reducescatter,
  reducescatterSync,
  type TensorAllreduceOptions,
  type TensorAlltoallOptions,
  type TensorAlltoallResult,
  type TensorBroadcastOptions,
  type TensorCollectiveOptions,
  type TensorGatherOptions,
  type TensorReducescatterOptions,
} from './collectives.js';
export { DashboardCallback, type DashboardCallbackOptions } from './dashboard_callback.js';
export { DistributedOptimizer, type DistributedOptimizerOptions } from './distributed_optimizer.js';
/** Elastic training (docs/tfjs.md): `rrtf.elastic.TfjsState({ model, optimizer, ...values })`. */
export * as elastic from './elastic_state.js';
export { JoinCallback, type JoinCallbackOptions } from './join_callback.js';
export { getLearningRate, setLearningRate } from './learning_rate.js';
export { LearningRateWarmupCallback, type LearningRateWarmupOptions } from './lr_warmup_callback.js';
export { MetricAverageCallback, type MetricAverageOptions } from './metric_average_callback.js';
export type { Collectives, ProcessSetOption, RuntimeOption } from './runtime.js';
export { type ShardOptions, shardArray, shardDataset, shardTensor } from './shard.js';
export { shardRange } from './shard_math.js';
