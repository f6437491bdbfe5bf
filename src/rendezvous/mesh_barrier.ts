/**
 * A store barrier: every rank marks itself ready and bumps a counter; the rank that brings the
 * counter to `size` sets a completion key that all the others are waiting on (no polling). On
 * a timeout the per-rank marks say which ranks never arrived.
 */
import { TimeoutError } from '../core/errors.js';
import type { Store } from './store.js';

const kOne = Uint8Array.of(1);

export async function barrier(
  store: Store,
  prefix: string,
  rank: number,
  size: number,
  deadline: number,
  timeoutMs: number,
): Promise<void> {
  await store.set(`${prefix}ready/${rank}`, kOne);
  if ((await store.add(`${prefix}ready-count`, 1)) === size) await store.set(`${prefix}all-ready`, kOne);
  try {
    await store.get(`${prefix}all-ready`, Math.max(0, Math.ceil(deadline - performance.now())));
  } catch (error) {
    if (!(error instanceof TimeoutError)) throw error;
    const marks = await Promise.allSettled([...Array(size).keys()].map((r) => store.get(`${prefix}ready/${r}`, 0)));
    const missing = marks.flatMap((m, r) => (m.status === 'rejected' ? [r] : []));
    throw new TimeoutError(
      `start-up of rank ${rank} (of ${size}) timed out after ${Math.round(timeoutMs)} ms: ${missing.length === 1 ? 'rank' : 'ranks'} ${missing.join(', ')} did not finish connecting to every rank`,
    );
  }
}
