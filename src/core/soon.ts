/**
 * Deferring work to the next turn of the event loop, and timers that do not hold a process
 * open, on Node and in a browser's worker alike, without touching any global.
 *
 * Node's setImmediate runs after the I/O events already due, which is what the engine wants
 * when it waits for the rest of a burst of submissions; a browser has no setImmediate, and a
 * zero timeout is the next task there (Chromium clamps it to 4 ms only when timeouts nest five
 * deep, which a message-driven engine does not do). A browser has no process to keep alive,
 * so its timers (plain numbers) have no unref.
 */

type Immediate = { unref(): unknown };
const setImmediateIfAny = (globalThis as { setImmediate?: (task: () => void) => Immediate }).setImmediate;

/**
 * Runs `task` on a later turn of the event loop. `unref`: Node may exit before it runs (work
 * worth doing only while the process lives anyway, such as collecting garbage).
 */
export function runSoon(task: () => void, options: { unref?: boolean } = {}): void {
  if (setImmediateIfAny === undefined) {
    setTimeout(task, 0);
    return;
  }
  const immediate = setImmediateIfAny(task);
  if (options.unref) immediate.unref();
}

const kSettled = Promise.resolve();

/**
 * Runs `task` in a microtask, once the current task's synchronous work is done, as
 * queueMicrotask does, for the per-call paths: Node's queueMicrotask makes an AsyncResource and a
 * bound function for every task (about 800 bytes and an async-hooks init), a reaction on a
 * settled promise only a small promise. A task that throws becomes an unhandled rejection, which
 * Node reports and ends the process for, as it does for an uncaught exception.
 */
export function afterThisTask(task: () => void): void {
  void kSettled.then(task);
}

/** `timer`, which no longer keeps Node's process alive (a browser's timers never do). */
export function unrefTimer<T>(timer: T): T {
  (timer as { unref?: () => unknown }).unref?.();
  return timer;
}
