/**
 * Holding the engine's ready report while its caller is still submitting a burst of calls.
 *
 * Why: the caller's thread posts the first call of a synchronous burst at once (so that a
 * caller that then blocks or computes still has it running) and the rest of the burst in one
 * message when the burst ends (engine_client.ts). Reported at once, the first call would open
 * a ready round of its own: it would run alone, and the rest of the step would wait a whole
 * round and run as a second collective. Instead the caller raises a shared flag for the length
 * of its burst (when the burst starts, if the previous one had several calls; else at its
 * second call, so a loop of lone calls never waits), and the engine, before reporting, waits
 * for the flag to drop (Atomics.waitAsync: the engine wakes on the caller's notify, it never
 * polls) or for `maxHoldMs`, whichever comes first, so calls that a long computation follows in
 * the same tick are delayed by at most that much.
 */

/** Atomics.waitAsync (ES2024; Node 16+), typed here because the project's lib is ES2022. */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs: number,
) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

export class BurstGate {
  /** When the current hold began, or undefined when not holding. */
  private holdingSince: number | undefined;

  constructor(
    /** Shared with the caller's thread: `signal[index]` is 1 while the caller is inside a burst. */
    private readonly signal: Int32Array,
    private readonly index: number,
    /** Autotune changes it as the job runs (0: no hold). */
    public maxHoldMs: number,
    /** Takes in, synchronously, whatever the caller posted before lowering the flag. */
    private readonly drain: () => void,
  ) {}

  /**
   * Calls `then` once the caller is outside a burst, or has held it for `maxHoldMs`, after
   * draining the submissions the burst posted (so they join the same report).
   */
  whenIdle(then: () => void): void {
    const now = performance.now();
    this.holdingSince ??= now;
    const left = this.holdingSince + this.maxHoldMs - now;
    if (left <= 0 || Atomics.load(this.signal, this.index) === 0) {
      this.holdingSince = undefined;
      this.drain();
      then();
      return;
    }
    const wait = waitAsync(this.signal, this.index, 1, left);
    if (!wait.async) {
      this.whenIdle(then);
      return;
    }
    // A pending waitAsync does not keep the event loop alive; the deadline's timer does.
    let woken = false;
    const wake = () => {
      if (woken) return;
      woken = true;
      clearTimeout(deadline);
      this.whenIdle(then);
    };
    const deadline = setTimeout(wake, left);
    void wait.value.then(wake);
  }
}
