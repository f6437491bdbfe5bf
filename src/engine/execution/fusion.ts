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
import type { ExecuteResponse, Request, Response } from '../wire/messages.js';

/** Merges consecutive fusible responses; `elementsOf(name)` is the element count of a tensor. */
export function planFusion(responses: Response[], elementsOf: (name: string) => number, thresholdBytes: number): Response[] {
  if (thresholdBytes <= 0 || responses.length < 2) return responses;
  const plan = new FusionPlan(thresholdBytes);
  for (const response of responses) {
    // A joined rank stands in for each tensor alone: it knows only the ruling request's shape.
    const r = response.kind === 'execute' && !response.joined ? response : undefined;
    if (r === undefined) plan.alone(response);
    else plan.add(r.request, r.names, tensorBytes(r, elementsOf), r);
  }
  return plan.responses;
}

/**
 * planFusion as responses come, one at a time: the ready rounds plan their agreed cached tensors
 * straight from the cache's requests, and a tensor that joins an open response costs a name
 * pushed, not a response of its own.
 */
export class FusionPlan {
  readonly responses: Response[] = [];
  private open: ExecuteResponse | undefined;
  private openKey: string | undefined;
  private openBytes = 0;

  constructor(private readonly thresholdBytes: number) {}

  /** A response that runs alone and ends the open one (not an execute response, or a joined rank's). */
  alone(response: Response): void {
    this.responses.push(response);
    this.open = undefined;
  }

  /**
   * The tensors `names` (or the one tensor named so) of `request`, `bytes` in all: they join the
   * open response if it has their fusion key and room, else start the next one (`response`
   * itself, when given, if they cannot fuse).
   */
  add(request: Request, names: string | readonly string[], bytes: number, response?: ExecuteResponse): void {
    const key = fusionKeyOf(request);
    if (key === undefined || this.thresholdBytes <= 0 || bytes > this.thresholdBytes) {
      this.alone(response ?? executeOf(request, names));
      return;
    }
    const open = this.open;
    if (open && this.openKey === key && this.openBytes + bytes <= this.thresholdBytes) {
      if (typeof names === 'string') open.names.push(names);
      else for (const name of names) open.names.push(name);
      this.openBytes += bytes;
      return;
    }
    const next = response ? { ...response, names: namesOf(names) } : executeOf(request, names);
    this.open = next;
    this.openKey = key;
    this.openBytes = bytes;
    this.responses.push(next);
  }
}

function namesOf(names: string | readonly string[]): string[] {
  return typeof names === 'string' ? [names] : [...names];
}

function executeOf(request: Request, names: string | readonly string[]): ExecuteResponse {
  return { kind: 'execute', names: namesOf(names), request, counts: [] };
}

function tensorBytes(response: ExecuteResponse, elementsOf: (name: string) => number): number {
  let elements = 0;
  for (const name of response.names) elements += elementsOf(name);
  return elements * bytesPerElement(response.request.dtype);
}
