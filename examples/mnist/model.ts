/** The demo's network: a small multilayer perceptron (784 → 128 → 10), ~100k weights. */
import * as tf from '@tensorflow/tfjs';
import { kClasses, kImageSize } from './data.js';

/** `seed`: initialise the kernels from it (the elastic mode does, so that runs can be compared); random otherwise. */
export function buildModel(seed?: number): tf.Sequential {
  const init = (offset: number) =>
    seed === undefined ? {} : { kernelInitializer: tf.initializers.glorotUniform({ seed: seed + offset }) };
  const model = tf.sequential();
  model.add(tf.layers.dense({ inputShape: [kImageSize], units: 128, activation: 'relu', ...init(0) }));
  model.add(tf.layers.dense({ units: kClasses, activation: 'softmax', ...init(1) }));
  return model;
}
