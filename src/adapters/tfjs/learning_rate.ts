/**
 * Reading and changing an optimizer's learning rate. tfjs has no common API for it: SGD and
 * Momentum cache −rate in a tensor and need setLearningRate(); Adam, Adagrad, Adadelta, Adamax
 * and RMSProp read their `learningRate` field at every step.
 */
import type * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../index.js';

interface WithRate {
  learningRate?: unknown;
  setLearningRate?: (rate: number) => void;
}

/**
 * @example
 * getLearningRate(tf.train.adam(0.001)); // 0.001
 */
export function getLearningRate(optimizer: tf.Optimizer): number {
  const rate = (optimizer as unknown as WithRate).learningRate;
  if (typeof rate !== 'number') {
    throw new InvalidArgumentError(`optimizer ${optimizer.getClassName()} has no numeric learningRate`);
  }
  return rate;
}

/**
 * @example
 * setLearningRate(model.optimizer, 0.001 * rr.size());
 */
export function setLearningRate(optimizer: tf.Optimizer, rate: number): void {
  if (!Number.isFinite(rate) || rate < 0)
    throw new InvalidArgumentError(`learning rate must be a finite number >= 0, got ${rate}`);
  const o = optimizer as unknown as WithRate;
  if (typeof o.setLearningRate === 'function') {
    o.setLearningRate(rate);
  } else if (typeof o.learningRate === 'number') {
    o.learningRate = rate;
  } else {
    throw new InvalidArgumentError(`optimizer ${optimizer.getClassName()} has no learning rate to set`);
  }
}
