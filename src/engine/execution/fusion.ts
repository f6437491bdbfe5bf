/**
 * Tensor fusion (Horovod's idea): allreduces that become ready together and agree on dtype and
 * reduce op run as one collective over one buffer, so 100 small tensors pay one negotiation
 * response, one ring and one set of message latencies instead of 100.
 *
 * How it works: rank 0 plans, right before it publishes a list of responses: consecutive
 * responses of one operation whose spec gives them the same fusion key (ops/: allreduce's is its
 * dtype and reduce op) are merged while their total stays at most
 * `thresholdBytes` (RINGREDUCE_FUSION_THRESHOLD_BYTES). A tensor larger than the threshold runs
 * alone, in place, without a copy. Every rank receives the merged response, so every rank packs
 * the same tensors in the same order (ops/packing.ts), runs the allreduce on the packed buffer
 * and copies the results back. The packed buffer comes from the engine's pool: a
 * training loop reuses it every step and never touches fresh memory.
 */
import { bytesPerElement } from '../../core/dtypes.js';
import { fusionKeyOf } from '../ops/registry.js';
import type { ExecuteResponse, Response } from '../wire/messages.js';

/** Merges consecutive fusible responses; `elementsOf(name)` is the element count of a tensor. */
export function planFusion(responses: Response[], elementsOf: (name: string) => number, thresholdBytes: number): Response[] {
  if (thresholdBytes <= 0 || responses.length < 2) return responses;
  const out: Response[] = [];
  let open: ExecuteResponse | undefined;
  let openKey: string | undefined;
  let openBytes = 0;
  for (const response of responses) {
    // A joined rank stands in for each tensor alone: it knows only the ruling request's shape.
    const r = response.kind === 'execute' && !response.joined ? response : undefined;
    const key = r && fusionKeyOf(r.request);
    const bytes = r && key !== undefined ? tensorBytes(r, elementsOf) : undefined;
    if (r === undefined || bytes === undefined || bytes > thresholdBytes) {
      out.push(response);
      open = undefined;
      continue;
    }
    if (open && openKey === key && openBytes + bytes <= thresholdBytes) {
      for (const name of r.names) open.names.push(name);
      openBytes += bytes;
      continue;
    }
    open = { ...r, names: [...r.names] };
    openKey = key;
    openBytes = bytes;
    out.push(open);
  }
  return out;
}

function tensorBytes(response: ExecuteResponse, elementsOf: (name: string) => number): number {
  let elements = 0;
  for (const name of response.names) elements += elementsOf(name);
  return elements * bytesPerElement(response.request.dtype);
}
