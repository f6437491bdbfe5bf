/**
 * Horovod's prescale and postscale factors (float allreduce and reducescatter): the input is
 * multiplied by `prescale` before the reduction and the result by `postscale` after it, on every
 * rank, as part of the collective. A factor of 1 is left out of the request, so a request without
 * factors has one representation on every rank and in the response cache.
 */
import { type FloatArray, scaleInPlace } from '../../algorithms/reduce.js';
import type { TypedArray } from '../../core/types.js';
import type { Reader, Writer } from '../wire/wire.js';
import type { FieldCheck } from './agreement.js';

export interface ScaleFactors {
  prescale?: number;
  postscale?: number;
}

export function writeScales(w: Writer, r: ScaleFactors): void {
  w.f64(r.prescale ?? 1);
  w.f64(r.postscale ?? 1);
}

export function readScales(r: Reader): ScaleFactors {
  const prescale = r.f64('prescale');
  const postscale = r.f64('postscale');
  if (!Number.isFinite(prescale) || !Number.isFinite(postscale)) r.fail(`scale factors ${prescale}, ${postscale}`);
  const scales: ScaleFactors = {};
  if (prescale !== 1) scales.prescale = prescale;
  if (postscale !== 1) scales.postscale = postscale;
  return scales;
}

export const kScalesCheck: FieldCheck<ScaleFactors> = {
  what: 'scale factors',
  text: (r) => `prescale ${r.prescale ?? 1}, postscale ${r.postscale ?? 1}`,
};

export function isScaled(r: ScaleFactors): boolean {
  return (r.prescale ?? 1) !== 1 || (r.postscale ?? 1) !== 1;
}

/** Multiplies `buf` (a float tensor: the API refuses factors on integers) by `factor`. */
export function scale(buf: TypedArray, factor: number | undefined): void {
  if (factor !== undefined && factor !== 1) scaleInPlace(buf as FloatArray, factor);
}
