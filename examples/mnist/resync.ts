/**
 * Ranks on different tfjs backends (a tab on WebGL, the others on wasm) compute each step with
 * other kernels and precision: the same averaged gradients then move their weights apart in the
 * last bits, and the gap grows. This callback measures the gap after each epoch (the largest
 * spread of any weight between ranks: one 'max' and one 'min' allreduce) and gives every rank
 * rank 0's weights again (rrtf.broadcastModel).
 */
import * as tf from '@tensorflow/tfjs';
import * as rr from 'ringreduce';
import * as rrtf from 'ringreduce/tfjs';

export class ResyncCallback extends tf.Callback {
  constructor(private readonly log: (line: string) => void) {
    super();
  }

  override async onEpochEnd(epoch: number): Promise<void> {
    const model = this.model as tf.LayersModel;
    const flat = await flatWeights(model);
    const [high, low] = await Promise.all([
      rr.allreduce(flat, { name: 'resync.max', op: 'max' }),
      rr.allreduce(flat, { name: 'resync.min', op: 'min' }),
    ]);
    let spread = 0;
    for (let i = 0; i < flat.length; i++) spread = Math.max(spread, (high[i] as number) - (low[i] as number));
    await rrtf.broadcastModel(model, { root: 0 });
    this.log(
      `epoch ${epoch + 1}: weights differed by up to ${spread.toExponential(2)} between ranks; rank 0's now on every rank`,
    );
  }
}

async function flatWeights(model: tf.LayersModel): Promise<Float32Array> {
  const parts = await Promise.all(model.getWeights().map((w) => w.data() as Promise<Float32Array>));
  const flat = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    flat.set(part, offset);
    offset += part.length;
  }
  return flat;
}
