/**
 * Which exchange a set's ready rounds use (ready_rounds.ts). All-to-all puts one one-way message
 * on a round's critical path but sends N - 1 per rank; recursive doubling sends about log2 N
 * but is log2 N messages deep. With few ranks the extra depth costs more than the messages
 * save; docs/performance.md has the simulated round times behind the switch point. The choice
 * depends only on the set's size and Config.readyExchange, so every member makes the same one
 * when the setting is the same everywhere (a rank that differs fails the job on its first
 * round: see ReadyPath.onReport).
 */
import type { ReadyExchange } from '../../core/settings.js';

export type ExchangeMode = Exclude<ReadyExchange, 'auto'>;

/** 'auto' uses all-to-all up to this many ranks, recursive doubling above. */
export const kAllToAllMaxRanks = 8;

export function exchangeModeFor(setting: ReadyExchange, size: number): ExchangeMode {
  if (setting !== 'auto') return setting;
  return size <= kAllToAllMaxRanks ? 'all-to-all' : 'recursive-doubling';
}
