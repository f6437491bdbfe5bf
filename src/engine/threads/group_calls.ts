/**
 * Grouped calls that came through the hand-off ring as one entry (hand_off.ts): the engine runs
 * each member as a call of its own, under the ids the caller reserved below the group's (the
 * group's id minus 1 + the member's index), and the caller hears once, when the last member has
 * settled: with the members' results, or with the first member's failure. Not at that failure
 * already: the caller keeps the members' names in flight until it hears, and a member still in
 * the engine must not meet the next call of its name (the engine reuses its submission object).
 */
import type { ErrorRecord } from '../../core/errors.js';
import { type CallResult, type FromEngine, hasResult } from './worker_protocol.js';

interface GroupCall {
  id: number;
  size: number;
  left: number;
  /** The first member's failure. */
  failure: ErrorRecord | undefined;
  /** The members' results, made at the first member that has one. */
  results: (CallResult | undefined)[] | undefined;
}

function isMemberOf(id: number, group: GroupCall): boolean {
  return id < group.id && id >= group.id - group.size;
}

export class GroupCalls {
  /** The group calls in flight (a handful: a training step's), searched by their members' ids. */
  private readonly active: GroupCall[] = [];

  /** Group call `id` of `size` members has started: its members' ids are id - 1 down to id - size. */
  start(id: number, size: number): void {
    this.active.push({ id, size, left: size, failure: undefined, results: undefined });
  }

  /**
   * What the caller is to be told of `message`: itself when it settles no member of a group call;
   * else, once the group's last member settled, the group's completion or its first member's
   * failure, and undefined meanwhile.
   */
  settle(message: FromEngine): FromEngine | undefined {
    if (this.active.length === 0 || (message.type !== 'done' && message.type !== 'failed')) return message;
    const { id } = message;
    let index = 0;
    while (index < this.active.length && !isMemberOf(id, this.active[index] as GroupCall)) index++;
    if (index === this.active.length) return message;
    const group = this.active[index] as GroupCall;
    if (--group.left === 0) this.active.splice(index, 1);
    if (message.type === 'failed') {
      group.failure ??= message.error;
    } else if (hasResult(message)) {
      group.results ??= new Array<CallResult | undefined>(group.size).fill(undefined);
      const { output, shape, counts } = message;
      group.results[group.id - 1 - id] = { output, shape, counts };
    }
    if (group.left > 0) return undefined;
    if (group.failure !== undefined) return { type: 'failed', id: group.id, error: group.failure };
    return group.results === undefined ? { type: 'done', id: group.id } : { type: 'done', id: group.id, members: group.results };
  }
}
