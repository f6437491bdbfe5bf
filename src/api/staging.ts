/** The caller's input copied into pooled shared memory, for collectives that only read it or use it as work space. */
import { bytesPerElement, viewOf } from '../core/dtypes.js';
import type { TypedArray } from '../core/types.js';
import type { CallContext } from './call.js';
import type { ParsedTensor } from './tensor_args.js';

export function copyToStaging(ctx: CallContext, t: ParsedTensor): { buffer: TypedArray; staging: SharedArrayBuffer } {
  const staging = ctx.staging.acquire(t.data.length * bytesPerElement(t.dtype));
  const buffer = viewOf(t.dtype, staging, 0, t.data.length);
  buffer.set(t.data as never);
  return { buffer, staging };
}
