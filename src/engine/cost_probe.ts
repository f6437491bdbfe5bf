/**
 * The job's own α and β for the algorithm choices made by cost from kCostChoiceMinRanks ranks on
 * (algorithms/cost_model.ts), measured at start-up; γ, the reduce kernels' time per byte, keeps
 * its built-in figure.
 *
 * How it works: rank 0 and rank ⌊N/2⌋ (on a job laid out host by host over several hosts, a pair
 * on two hosts: the slower link, the one flat collectives cross) ping-pong kSmallRounds messages
 * of kSmallBytes, then kLargeRounds of kLargeBytes, after one of each to warm the link up. Rank 0
 * takes the fastest round trip of each size (the least disturbed by other work on the host):
 * α = small / 2 and β = (large / 2 − α) / kLargeBytes, and sends both down a binomial tree, so
 * that every rank holds the same figures and makes the same choices. A measurement that makes
 * no sense (not finite, not positive) gives the built-in figures on every rank alike.
 *
 * Fewer than kCostChoiceMinRanks ranks measure nothing: their choices are the fixed ones. The
 * setting (RINGREDUCE_COST_MODEL, core/config.ts) may turn the measurement off (the built-in
 * figures) or give the figures instead.
 *
 * Cost: 2 × (kSmallRounds + 1) small messages and 2 × (kLargeRounds + 1) of kLargeBytes between
 * two ranks, then ⌈log2 N⌉ rounds of 16 bytes: a few milliseconds at start-up.
 */
import { treeBroadcast } from '../algorithms/broadcast.js';
import { type CostModel, kCostChoiceMinRanks } from '../algorithms/cost_model.js';
import type { CostModelSetting } from '../core/settings.js';
import type { Transport } from '../transport/transport.js';
import { kCostProbeTag } from './wire/tags.js';

const kSmallBytes = 8;
const kSmallRounds = 5;
/** Large enough that β·bytes dwarfs α (about 20 times on loopback), small enough to cost a millisecond. */
const kLargeBytes = 1 << 20;
const kLargeRounds = 2;

/**
 * The figures every rank's algorithm options carry (`jobCostModel`), or undefined for the
 * built-in ones. Every rank of the job calls it at start-up, after the transport is connected.
 */
export async function jobCostModel(transport: Transport, setting: CostModelSetting): Promise<Partial<CostModel> | undefined> {
  if (setting === 'off') return undefined;
  if (setting !== 'measure') return setting;
  const { rank, size } = transport;
  if (size < kCostChoiceMinRanks) return undefined;
  const partner = size >> 1;
  const figures = new Float64Array(2);
  if (rank === 0) figures.set(await measure(transport, partner));
  else if (rank === partner) await echo(transport, 0);
  await treeBroadcast(transport, new Uint8Array(figures.buffer), 0, kCostProbeTag);
  const [alpha, beta] = figures as unknown as [number, number];
  const sane = (x: number) => Number.isFinite(x) && x > 0;
  return sane(alpha) && sane(beta) ? { alpha, beta } : undefined;
}

/** Rank 0's side: [α, β] in seconds. */
async function measure(transport: Transport, peer: number): Promise<[number, number]> {
  const fastest = async (bytes: number, rounds: number) => {
    const out = new Uint8Array(bytes);
    const back = new Uint8Array(bytes);
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i <= rounds; i++) {
      const start = performance.now();
      const received = transport.recv(peer, kCostProbeTag, back);
      await transport.send(peer, kCostProbeTag, out);
      await received;
      // The first round warms the link up (connections, buffers): not counted.
      if (i > 0) best = Math.min(best, (performance.now() - start) / 1000);
    }
    return best;
  };
  const small = await fastest(kSmallBytes, kSmallRounds);
  const large = await fastest(kLargeBytes, kLargeRounds);
  const alpha = small / 2;
  return [alpha, (large / 2 - alpha) / kLargeBytes];
}

/** The partner's side: every message goes straight back. */
async function echo(transport: Transport, peer: number): Promise<void> {
  for (const [bytes, rounds] of [
    [kSmallBytes, kSmallRounds],
    [kLargeBytes, kLargeRounds],
  ] as const) {
    const buf = new Uint8Array(bytes);
    for (let i = 0; i <= rounds; i++) {
      await transport.recv(peer, kCostProbeTag, buf);
      await transport.send(peer, kCostProbeTag, buf);
    }
  }
}
