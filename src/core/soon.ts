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

/** `timer`, which no longer keeps Node's process alive (a browser's timers never do). */
export function unrefTimer<T>(timer: T): T {
  (timer as { unref?: () => unknown }).unref?.();
  return timer;
}
