/**
 * One training step's gradients as a single flat Float32Array, and back. The order is the
 * order tfjs hands them over (the model's trainable weights), the same on every rank; names
 * never travel. A missing (null) gradient stays missing and takes no room.
 */
import * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../index.js';
import { FlatLayout } from './flat_layout.js';

export interface NamedTensor {
  name: string;
  tensor: tf.Tensor;
}

/** What tf.Optimizer.applyGradients accepts. */
export type Gradients = tf.NamedTensorMap | NamedTensor[];

interface Entry {
  name: string;
  tensor: tf.Tensor | null;
}

export class GradientBundle {
  readonly layout: FlatLayout;
  private readonly entries: Entry[];
  private readonly present: tf.Tensor[];

  constructor(private readonly gradients: Gradients) {
    this.entries = Array.isArray(gradients)
      ? gradients.map((g) => ({ name: g.name, tensor: g.tensor ?? null }))
      : Object.keys(gradients).map((name) => ({ name, tensor: gradients[name] ?? null }));
    this.present = [];
    for (const { name, tensor } of this.entries) {
      if (tensor === null) continue;
      if (tensor.dtype !== 'float32') {
        throw new InvalidArgumentError(`gradient of ${name} has dtype ${tensor.dtype}; only float32 gradients are averaged`);
      }
      this.present.push(tensor);
    }
    this.layout = new FlatLayout(this.present.map((t) => t.size));
  }

  /**
   * What identifies the gradients' layout: names and sizes, in order. Steps accumulated into one
   * buffer must agree on it.
   */
  get signature(): string {
    return this.entries.map(({ name, tensor }) => `${name}:${tensor === null ? '-' : tensor.size}`).join(',');
  }

  /** The present gradients' values, in order (synchronous reads). */
  readSync(): Float32Array[] {
    return this.present.map((t) => t.dataSync() as Float32Array);
  }

  /** The present gradients' values, in order. */
  read(): Promise<Float32Array[]> {
    return Promise.all(this.present.map((t) => t.data() as Promise<Float32Array>));
  }

  /** The gradients packed into `into` (`layout.total` elements; default a new buffer), synchronous reads. */
  packSync(into: Float32Array<ArrayBufferLike> = new Float32Array(this.layout.total)): Float32Array<ArrayBufferLike> {
    return this.layout.pack(this.readSync(), into);
  }

  /** The gradients packed into `into` (`layout.total` elements; default a new buffer). */
  async pack(into: Float32Array<ArrayBufferLike> = new Float32Array(this.layout.total)): Promise<Float32Array<ArrayBufferLike>> {
    return this.layout.pack(await this.read(), into);
  }

  /** New gradient tensors holding `flat`'s values, in the same form (array or map) as the input. */
  unpack(flat: Float32Array): Gradients {
    const views = this.layout.unpack(flat);
    let next = 0;
    const rebuilt = this.entries.map(({ name, tensor }) => {
      if (tensor === null) return { name, tensor: null };
      return { name, tensor: tf.tensor(views[next++] as Float32Array, tensor.shape, 'float32') };
    });
    if (Array.isArray(this.gradients)) return rebuilt as NamedTensor[];
    const map: tf.NamedTensorMap = {};
    for (const { name, tensor } of rebuilt) if (tensor !== null) map[name] = tensor;
    return map;
  }
}

/** Disposes the tensors of `gradients`. */
export function disposeGradients(gradients: Gradients): void {
  tf.dispose(Array.isArray(gradients) ? gradients.flatMap((g) => (g.tensor ? [g.tensor] : [])) : gradients);
}
