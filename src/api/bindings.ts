/**
 * Which submissions the engine already holds, by process set and name (engine/threads/hand_off.ts): a
 * call whose request and memory are those of the last call of its name is sent as the slot the
 * engine keeps them under, without a message. Only calls that can repeat are bound: named ones
 * on memory the caller keeps (option 'out', or in place), not fresh outputs or pooled input copies,
 * and not sends or recvs (their names never repeat).
 *
 * A grouped call whose members are all bound is bound too, by group name, to a slot of its own
 * that stands for its members' slots in order: its next call is one entry of the ring, not one
 * per member. It holds while every member's binding does.
 */
import { isUnnamed } from '../core/collective_ops.js';
import type { TypedArray } from '../core/types.js';
import type { GroupBinding } from '../engine/threads/worker_protocol.js';
import type { Request } from '../engine/wire/messages.js';
import type { PeerRequest } from '../engine/wire/peer_request.js';

/** Bindings kept at most; past it the least recently used is dropped (a loop with ever new names). */
const kMaxBindings = 4096;

/** What of a call (engine_client.ts: Call) decides whether the engine holds it. */
export interface BindableCall {
  request: Request | PeerRequest;
  buffer: TypedArray | undefined;
  output?: TypedArray | undefined;
  fresh?: boolean | undefined;
  released?: (() => void) | undefined;
  set?: number | undefined;
}

interface Binding {
  slot: number;
  request: Request;
  buffer: TypedArray | undefined;
  output: TypedArray | undefined;
}

/** A new binding: its slot, and the slot the engine can forget (the name's previous binding, or an evicted one). */
export interface NewBinding {
  slot: number;
  drop?: number;
}

export class Bindings {
  /** Per process set (0: the world), by name, least recently used first. */
  private readonly bySet = new Map<number, Map<string, Binding>>();
  private count = 0;
  /** Bound groups: per process set, by group name, least recently used first. */
  private readonly groupsBySet = new Map<number, Map<string, GroupBinding>>();
  private groupCount = 0;
  private nextSlot = 0;

  /** The slot of a grouped call (its members in order) when the engine holds the group, else undefined. */
  groupSlotOf(calls: readonly BindableCall[]): number | undefined {
    const group = groupOf(calls);
    if (group === undefined) return undefined;
    const binding = this.groupsBySet.get(group.set)?.get(group.name);
    if (binding === undefined || binding.members.length !== calls.length) return undefined;
    for (let index = 0; index < calls.length; index++) {
      if (this.slotOf(calls[index] as BindableCall) !== binding.members[index]) return undefined;
    }
    return binding.slot;
  }

  /** Binds a grouped call whose members are all bound (slotOf) to a new slot; undefined when it cannot. */
  bindGroup(calls: readonly BindableCall[]): GroupBinding | undefined {
    const group = groupOf(calls);
    if (group === undefined || group.size !== calls.length) return undefined;
    const members: number[] = [];
    for (const call of calls) {
      const slot = this.slotOf(call);
      if (slot === undefined) return undefined;
      members.push(slot);
    }
    let names = this.groupsBySet.get(group.set);
    if (!names) {
      names = new Map();
      this.groupsBySet.set(group.set, names);
    }
    const binding: GroupBinding = { slot: this.nextSlot++, members };
    const previous = names.get(group.name);
    names.delete(group.name);
    names.set(group.name, binding);
    if (previous) return { ...binding, drop: previous.slot };
    if (++this.groupCount <= kMaxBindings) return binding;
    const evicted = evictOldest(this.groupsBySet);
    this.groupCount--;
    return evicted === undefined ? binding : { ...binding, drop: evicted.slot };
  }

  /** The slot of `call` when the engine holds exactly this submission, else undefined. */
  slotOf(call: BindableCall): number | undefined {
    const binding = this.bySet.get(call.set ?? 0)?.get(call.request.name);
    if (
      binding === undefined ||
      binding.buffer !== call.buffer ||
      binding.output !== call.output ||
      // A repeated call (repeats.ts) brings the very request it was bound with.
      (binding.request !== call.request && !sameRequest(binding.request, call.request))
    )
      return undefined;
    return binding.slot;
  }

  /** Binds `call` to a new slot when it can repeat (see the header); undefined when it cannot. */
  bind(call: BindableCall): NewBinding | undefined {
    const { request } = call;
    if (call.fresh || call.released !== undefined || isPeer(request) || isUnnamed(request.name)) return undefined;
    const set = call.set ?? 0;
    let names = this.bySet.get(set);
    if (!names) {
      names = new Map();
      this.bySet.set(set, names);
    }
    const slot = this.nextSlot++;
    const previous = names.get(request.name);
    names.delete(request.name);
    names.set(request.name, { slot, request, buffer: call.buffer, output: call.output });
    if (previous) return { slot, drop: previous.slot };
    if (++this.count <= kMaxBindings) return { slot };
    this.count--;
    return { slot, drop: evictOldest(this.bySet)?.slot };
  }
}

/** The group tag of a grouped call's members and their process set (0: the world); undefined for calls of no group. */
function groupOf(calls: readonly BindableCall[]): { name: string; size: number; set: number } | undefined {
  const first = calls[0];
  const group = (first?.request as Request | undefined)?.group;
  return first && group && { name: group.name, size: group.size, set: first.set ?? 0 };
}

/** Drops the least recently bound name's binding (of any set); returns it. */
function evictOldest<B>(bySet: Map<number, Map<string, B>>): B | undefined {
  for (const names of bySet.values()) {
    for (const [name, binding] of names) {
      names.delete(name);
      return binding;
    }
  }
  return undefined;
}

function isPeer(request: Request | PeerRequest): request is PeerRequest {
  return request.op === 'send' || request.op === 'recv' || request.op === 'batchSendRecv';
}

/** Whether two requests (plain data: numbers, strings, arrays of numbers, a group tag) are the same. */
function sameRequest(a: Request, b: Request | PeerRequest): boolean {
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  let keys = 0;
  for (const key in x) {
    keys++;
    const u = x[key];
    const v = y[key];
    if (u === v) continue;
    if (Array.isArray(u)) {
      if (!Array.isArray(v) || u.length !== v.length) return false;
      for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) return false;
    } else if (typeof u === 'object' && u !== null && typeof v === 'object' && v !== null) {
      if (!sameRequest(u as Request, v as Request)) return false;
    } else return false;
  }
  for (const _ in y) keys--;
  return keys === 0;
}
