/**
 * The collectives by name, in wire order: an operation's index is its code in negotiation
 * messages and its slot in rr.stats(), so the list is append only. The engine's registry
 * (engine/ops/registry.ts) lists one spec per name in this order, which a unit test pins; the
 * caller's thread needs the names alone (unnamed calls, stats), not the specs behind them.
 */
export const kCollectiveOps = [
  'allreduce',
  'allgather',
  'broadcast',
  'barrier',
  'reducescatter',
  'alltoall',
  'reduce',
  'gather',
  'scatter',
  'addProcessSet',
  'removeProcessSet',
  'join',
] as const;

export type CollectiveOp = (typeof kCollectiveOps)[number];

/** The name of the n-th unnamed call of `op` on a rank: ranks match unnamed calls by their order per op. */
export function unnamedName(op: CollectiveOp, n: number): string {
  return `${op}#${n}`;
}

const kUnnamed = new RegExp(`^(${kCollectiveOps.join('|')})#\\d+$`);

/** Whether `name` is one that unnamedName made: each is used once, so it is never worth caching. */
export function isUnnamed(name: string): boolean {
  return kUnnamed.test(name);
}

const kUnnamedLabel = /^[A-Za-z]+ #\d+$/;

/** Whether `name` is an unnamed call's of another kind (a group, a send: 'groupedAllreduce #3'), never repeated either. */
export function isUnnamedLabel(name: string): boolean {
  return kUnnamedLabel.test(name);
}
