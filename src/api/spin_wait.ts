/**
 * Waiting for the engine thread on a shared counter: a short bounded spin, then sleep.
 *
 * Why spin at all: waking a thread that sleeps in Atomics.wait costs 20-35 µs here (a futex
 * wake-up across cores), while the spin sees the store within a fraction of a microsecond. A
 * small collective often completes within that window. Why bounded: on an oversubscribed
 * machine (4 ranks on 2 cores) a spinning caller takes the core its engine needs, so after
 * kSpinMicros the caller sleeps; and the sleep has the caller's deadline, so nothing waits
 * forever. An idle job never spins: the spin only runs inside a ...Sync call.
 */
/**
 * Longest spin before sleeping, in microseconds. 10 against 50 µs, 2 ranks, 7 alternations of
 * `node dist/bench/main.js --op allreduce --sizes 4,16K,1M --ranks 2 --sync`: 4 B 501 against
 * 583 µs mean, 16 KiB 718 against 781 µs, 1 MiB 2.40 against 2.48 ms. With 4 threads on 2
 * cores a longer spin holds a core the engines need.
 */
export const kSpinMicros = 10;

/**
 * Returns once `signal[index]` no longer equals `seen`, or `timeoutMs` has passed.
 * @returns whether the value changed.
 */
export function waitForChange(
  signal: Int32Array,
  index: number,
  seen: number,
  timeoutMs: number,
  spinMicros = kSpinMicros,
): boolean {
  const start = performance.now();
  const spinUntil = start + Math.min(spinMicros / 1000, timeoutMs);
  while (Atomics.load(signal, index) === seen) {
    if (performance.now() >= spinUntil) {
      const left = start + timeoutMs - performance.now();
      if (left <= 0) return false;
      return Atomics.wait(signal, index, seen, left) !== 'timed-out';
    }
  }
  return true;
}
