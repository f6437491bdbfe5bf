/**
 * The learning-rate warm-up of Goyal et al. ("Accurate, Large Minibatch SGD", 2017), as
 * Horovod's Keras callback applies it: training on `size` ranks multiplies the global batch by
 * `size`, so the learning rate is scaled by `size` too, but starting at the scaled rate
 * diverges early on. The rate ramps linearly from target/size (the single-rank rate) to the
 * target over the first `warmupEpochs` epochs, then stays at the target.
 */

export interface WarmupSpec {
  /** The rate after warm-up, usually the single-rank rate × size. */
  target: number;
  size: number;
  warmupEpochs: number;
}

/** The rate at fractional epoch `epoch` (epoch + batch / stepsPerEpoch). */
export function warmupLearningRate(spec: WarmupSpec, epoch: number): number {
  const { target, size, warmupEpochs } = spec;
  if (warmupEpochs <= 0 || epoch >= warmupEpochs) return target;
  return (target / size) * ((Math.max(0, epoch) * (size - 1)) / warmupEpochs + 1);
}
