/**
 * What the conformance tests of process sets, join and grouped collectives share: the two kinds
 * of world of real ranks (memory: N engines in this thread; tcp: N engine worker threads over
 * loopback), and small assertions over every rank's outcome.
 */
import assert from 'node:assert/strict';
import type { ProcessSet, RingReduce } from '../../src/api/runtime.js';
import type { InitOptions } from '../../src/core/config.js';
import { startMemoryWorld } from './local_engine.js';
import { startWorld } from './world.js';

export interface WorldFactory {
  name: 'memory' | 'tcp';
  start(size: number, options?: InitOptions): Promise<RingReduce[]>;
}

export const kWorldFactories: readonly WorldFactory[] = [
  { name: 'memory', start: async (size, options) => startMemoryWorld(size, options) },
  { name: 'tcp', start: (size, options) => startWorld(size, options) },
];

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a rejection naming `what` after `ms` (a hang fails the test instead of the run). */
export async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Every promise rejects with `kind`, its message matching `pattern`, and all with the same
 * message; returns it.
 */
export async function expectSameRejection(
  promises: readonly Promise<unknown>[],
  kind: new (...args: never[]) => Error,
  pattern: RegExp,
  what = 'call',
): Promise<string> {
  const settled = await Promise.allSettled(promises);
  const messages = settled.map((s, i) => {
    assert.equal(s.status, 'rejected', `${what} #${i} should have failed`);
    const reason = (s as PromiseRejectedResult).reason as Error;
    assert.ok(reason instanceof kind, `${what} #${i}: ${reason.name}: ${reason.message}`);
    assert.match(reason.message, pattern);
    return reason.message;
  });
  assert.equal(new Set(messages).size, 1, `${what}: the same message everywhere: ${messages.join(' | ')}`);
  return messages[0] as string;
}

/** addProcessSet(ranks) on every rank of `world` at once: each rank's ProcessSet, by rank. */
export async function addSet(world: readonly RingReduce[], ranks: readonly number[]): Promise<ProcessSet[]> {
  const sets = await Promise.all(world.map((rr) => rr.addProcessSet(ranks)));
  const ids = new Set(sets.map((s) => s.id));
  assert.equal(ids.size, 1, `every rank numbers the set alike: ${[...ids].join(', ')}`);
  return sets;
}

/** removeProcessSet on every rank at once (`sets` by rank, as addSet returns them). */
export async function removeSet(world: readonly RingReduce[], sets: readonly ProcessSet[]): Promise<void> {
  await Promise.all(world.map((rr, rank) => rr.removeProcessSet(sets[rank] as ProcessSet)));
}

/**
 * A test body that fails after `ms` instead of hanging. Its timer also keeps the event loop alive:
 * the memory world's own timers (the stall inspector's) do not, so without it a memory test that
 * waits for a stall timeout would end the process with its promises pending.
 */
export function bounded(ms: number, body: () => Promise<void>): () => Promise<void> {
  return () => withDeadline(body(), ms, 'the test');
}
