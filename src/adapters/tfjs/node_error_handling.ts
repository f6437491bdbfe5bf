/**
 * TF.js's WebAssembly backend is an Emscripten module, and on Node it adds two process handlers
 * when it starts: one rethrows every uncaught error from inside the 'uncaughtException'
 * handler, the other turns every unhandled rejection into such an error. Node then exits with
 * code 7 (its exception handler failed) and prints the backend's own line on top, whatever the
 * program's error was: a failing rank reads as a crash of tfjs.
 *
 * From the adapter's import on, those two handlers are removed as soon as they are added (and
 * any already there), so that Node's own handling applies again: the error printed as thrown,
 * exit code 1. Other handlers are left alone. What the handlers did besides, letting
 * Emscripten's ExitStatus pass, matters only to modules that call exit(), which the backend
 * does not. Nothing happens in a browser.
 */

type Listener = (...args: unknown[]) => void;

/** The part of Node's `process` used here (untyped events: the adapter compiles for browsers too). */
interface ProcessEvents {
  listeners(event: string): Listener[];
  removeListener(event: string | symbol, listener: Listener): unknown;
  on(event: 'newListener', listener: (event: string | symbol, listener: Listener) => void): unknown;
}

/** Emscripten's handlers, by their source: `if (!(ex instanceof ExitStatus)) throw ex` and `(reason) => { throw reason }`. */
function isEmscriptenRethrow(event: string | symbol, listener: Listener): boolean {
  const source = Function.prototype.toString.call(listener);
  if (event === 'uncaughtException') return /instanceof ExitStatus/.test(source) && /\bthrow\b/.test(source);
  if (event === 'unhandledRejection') return /^(?:function\s*)?\(\s*(\w+)\s*\)\s*(?:=>\s*)?\{\s*throw\s+\1;?\s*\}$/.test(source);
  return false;
}

export function keepNodeErrorHandling(): void {
  const proc = (globalThis as { process?: Partial<ProcessEvents> }).process;
  if (typeof proc?.on !== 'function' || typeof proc.listeners !== 'function') return;
  const events = proc as ProcessEvents;
  for (const event of ['uncaughtException', 'unhandledRejection']) {
    for (const listener of events.listeners(event)) {
      if (isEmscriptenRethrow(event, listener)) events.removeListener(event, listener);
    }
  }
  events.on('newListener', (event, listener) => {
    // Called before the listener is added: it is removed once the adding code has run.
    if (isEmscriptenRethrow(event, listener)) queueMicrotask(() => events.removeListener(event, listener));
  });
}
