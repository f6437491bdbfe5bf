/**
 * Grouped collectives (Horovod's grouped_allreduce): the members of a group are negotiated as one
 * unit. Rank 0's coordinator hands each member's response here once every rank has submitted it;
 * the gate holds them until the whole group is in, then releases them together, in member order,
 * so they are published (and fused) together and none runs before all are ready on every rank. A
 * member that fails (a mismatch) fails the whole group with its message; a member that stalls
 * fails the whole group too (see `fail`).
 */

import { fusionKeyOf } from '../ops/registry.js';
import type { ErrorResponse, Request, Response } from '../wire/messages.js';

/** `responses` reordered (stably) so that those with the same fusion key are adjacent. */
function byFusionKey(responses: readonly Response[]): Response[] {
  const keyOf = (r: Response) => (r.kind === 'execute' ? (fusionKeyOf(r.request) ?? `${r.request.op}/`) : '');
  const order = new Map<string, number>();
  for (const r of responses) if (!order.has(keyOf(r))) order.set(keyOf(r), order.size);
  return [...responses].sort((a, b) => (order.get(keyOf(a)) ?? 0) - (order.get(keyOf(b)) ?? 0));
}

interface HeldGroup {
  size: number;
  responses: (Response | undefined)[];
  count: number;
}

export class GroupGate {
  private readonly held = new Map<string, HeldGroup>();
  /** Groups that failed while some members were still waiting: those fail as they come in. */
  private readonly failed = new Map<string, { failure: ErrorResponse; outstanding: Set<number> }>();

  /** `response` is ready (every rank submitted `request`): the group's responses once it is whole, else nothing. */
  admit(request: Request, response: Response): Response[] {
    const group = request.group;
    if (!group) return [response];
    const earlier = this.failed.get(group.name);
    if (earlier?.outstanding.delete(group.index)) {
      if (earlier.outstanding.size === 0) this.failed.delete(group.name);
      return [{ ...earlier.failure, names: response.names, ranks: undefined }];
    }
    let held = this.held.get(group.name);
    if (!held) {
      held = { size: group.size, responses: new Array(group.size).fill(undefined), count: 0 };
      this.held.set(group.name, held);
    }
    if (held.responses[group.index] === undefined) held.count++;
    held.responses[group.index] = response;
    if (held.count < held.size) return [];
    this.held.delete(group.name);
    const responses = held.responses as Response[];
    const failed = responses.find((r): r is ErrorResponse => r.kind === 'error');
    // Members that fuse together next to each other: fusion merges consecutive responses only.
    if (!failed) return byFusionKey(responses);
    // One member's failure is the group's: every member fails with it, on every rank.
    return responses.map((r) => ({ ...failed, names: r.names, message: `group '${group.name}': ${failed.message}` }));
  }

  /**
   * The members of `group` that are held (complete on every rank) when another member fails
   * before it is (a stall): their responses, turned into that failure.
   */
  fail(group: { name: string; size: number; index: number }, failure: ErrorResponse): ErrorResponse[] {
    const known = this.failed.get(group.name);
    if (known) {
      // Another member of a group that failed already: it is no longer awaited.
      known.outstanding.delete(group.index);
      if (known.outstanding.size === 0) this.failed.delete(group.name);
      return [];
    }
    const held = this.held.get(group.name);
    this.held.delete(group.name);
    const outstanding = new Set<number>();
    for (let i = 0; i < group.size; i++) if (i !== group.index && held?.responses[i] === undefined) outstanding.add(i);
    if (outstanding.size > 0) this.failed.set(group.name, { failure, outstanding });
    return (held?.responses ?? [])
      .filter((r): r is Response => r !== undefined)
      .map((r) => ({ ...failure, names: r.names, ranks: undefined }));
  }

  clear(): void {
    this.held.clear();
    this.failed.clear();
  }
}
