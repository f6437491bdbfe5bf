/**
 * The program worker's side of a browser rank (engine/threads/browser_protocol.ts): the environment
 * ringrun's page posts it first, and the engines the page starts for it on request.
 */
import { InvalidArgumentError, RingReduceError, TimeoutError } from '../../core/errors.js';
import { kEnvDeadlineMs, type PageToProgram, type ProgramToPage } from '../../engine/threads/browser_protocol.js';
import { createSyncMailbox, SyncMailboxReader } from '../../engine/threads/sync_mailbox.js';
import type { EngineInit, FromEngine } from '../../engine/threads/worker_protocol.js';
import type { EngineEvents, EngineThread, Environment } from '../platform.js';

/** A dedicated worker's global scope, as far as this module uses it (the DOM lib types `self` as a Window). */
interface WorkerScope {
  postMessage(message: ProgramToPage, options?: StructuredSerializeOptions): void;
  addEventListener(type: 'message', listener: (event: MessageEvent) => void): void;
  removeEventListener(type: 'message', listener: (event: MessageEvent) => void): void;
}

/** This thread's scope when it is a dedicated worker; undefined elsewhere (a page's main thread). */
function workerScope(): WorkerScope | undefined {
  const Scope = (globalThis as { DedicatedWorkerGlobalScope?: abstract new () => unknown }).DedicatedWorkerGlobalScope;
  return Scope !== undefined && globalThis instanceof Scope ? (globalThis as unknown as WorkerScope) : undefined;
}

function isPageMessage(data: unknown): data is PageToProgram {
  return typeof data === 'object' && data !== null && typeof (data as { type?: unknown }).type === 'string';
}

/**
 * The environment the page posts this worker first. Listened for as this module loads, not when
 * init() is called: the page posts it once, as it starts the worker, and a message that finds no
 * listener is lost, while the program may call init() much later (after loading its data). Not
 * state that changes: a promise of this worker's birth data, like process.env on Node.
 */
const kFromPage: Promise<Environment> | undefined = ((scope) => {
  if (scope === undefined) return undefined;
  return new Promise<Environment>((resolve) => {
    const listener = (event: MessageEvent) => {
      if (!isPageMessage(event.data) || event.data.type !== 'ringreduce:env') return;
      scope.removeEventListener('message', listener);
      resolve(Object.freeze({ ...event.data.env }));
    };
    scope.addEventListener('message', listener);
  });
})(workerScope());

/** The rank's environment, once the page has posted it; refused at once outside a worker or a cross-origin isolated page. */
export async function pageEnvironment(): Promise<Environment> {
  if (kFromPage === undefined) {
    throw new InvalidArgumentError(
      "ringreduce in a browser runs in the program worker that ringrun's page starts: init() was called outside a dedicated worker (on a page's main thread?)",
    );
  }
  if ((globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === false) {
    throw new InvalidArgumentError(
      'ringreduce needs SharedArrayBuffer, which a browser gives only to a cross-origin isolated page: serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp (ringrun does)',
    );
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new TimeoutError(
            `no environment from the page within ${kEnvDeadlineMs} ms: this worker was not started by ringrun's page (its first message is the rank's environment, { type: 'ringreduce:env', env })`,
          ),
        ),
      kEnvDeadlineMs,
    );
  });
  try {
    return await Promise.race([kFromPage, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Tells the page that the rank has shut down for good (Platform.rankClosed). */
export function tellRankClosed(): void {
  workerScope()?.postMessage({ type: 'ringreduce:rank-closed' });
}

/** Names an engine in the messages about it. */
function engineName(): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Asks the page for an engine worker and talks to it over a MessageChannel; a ...Sync call takes
 * its completion from the sync mailbox (engine/threads/sync_mailbox.ts), since a browser cannot take a
 * message off a port without the event loop.
 */
export function startPageEngine(init: EngineInit, events: EngineEvents): EngineThread {
  const scope = workerScope();
  if (scope === undefined) throw new InvalidArgumentError("a browser rank's engine is started from its program worker");
  const mailbox = createSyncMailbox();
  const reader = new SyncMailboxReader(mailbox);
  const { port1, port2 } = new MessageChannel();
  const engine = engineName();
  const fromPage = (event: MessageEvent) => {
    if (!isPageMessage(event.data) || event.data.type !== 'ringreduce:engine-failed' || event.data.engine !== engine) return;
    events.gone(new RingReduceError(`the ringreduce engine worker failed: ${event.data.message}`));
  };
  scope.addEventListener('message', fromPage);
  port1.onmessage = (event: MessageEvent) => events.messages(event.data as FromEngine[]);
  scope.postMessage({ type: 'ringreduce:start-engine', engine, init: { ...init, mailbox }, port: port2 }, { transfer: [port2] });
  return {
    post: (message) => port1.postMessage(message),
    takeSync: (id) => {
      const settled = reader.take(id);
      return settled === undefined ? [] : [settled];
    },
    // A page keeps its workers as long as it lives: nothing holds a process open.
    keepAlive: () => {},
    terminate: async () => {
      scope.removeEventListener('message', fromPage);
      port1.close();
      scope.postMessage({ type: 'ringreduce:stop-engine', engine });
    },
  };
}
