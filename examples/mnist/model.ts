/** The demo's network: a small multilayer perceptron (784 → 128 → 10), ~100k weights. */
import * as tf from '@tensorflow/tfjs';
import { kClasses, kImageSize } from './data.js';

export function buildModel(): tf.Sequential {
  const model = tf.sequential();
  model.add(tf.layers.dense({ inputShape: [kImageSize], units: 128, activation: 'relu' }));
  model.add(tf.layers.dense({ units: kClasses, activation: 'softmax' }));
  return model;
}
