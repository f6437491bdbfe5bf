/**
 * The entry of a browser rank's engine worker (a module Web Worker the page starts: see
 * browser_protocol.ts): the host of engine_main.ts over the MessagePort the program worker sent
 * through the page, logging to the console (and to the page, which passes lines on to
 * ringrun), with the backends of browserBackends (solo, web), and reporting to ringrun's
 * dashboard through the page. What Node's entry (worker.ts) has and this one has not: no
 * timeline file (a browser has no file system; RINGREDUCE_TIMELINE is refused with a warning),
 * no forced garbage collection (a browser exposes no collector), and no early take of a burst's
 * submissions (a browser has no receiveMessageOnPort: a burst's later calls join the next
 * report instead of the first one's).
 *
 * Built into dist/browser/engine_worker.js (scripts/build-browser.mjs), which ringrun serves.
 */
import type { Config } from '../../core/config.js';
import { InvalidArgumentError } from '../../core/errors.js';
import { Logger } from '../../core/logger.js';
import { soloBackend } from '../../transport/solo_transport.js';
import { browserWebBackend } from '../../transport/web/browser_openers.js';
import { DataChannelRequests, type PagePort } from '../../transport/web/data_channel_requests.js';
import { reportEngine } from '../reporting/engine_reporting.js';
import type { EngineToPage, PageToEngine } from './browser_protocol.js';
import { type EngineBackends, runEngine } from './engine_main.js';
import { SyncMailboxWriter } from './sync_mailbox.js';
import { type EngineInit, kSignalCompletions, type ToEngine } from './worker_protocol.js';

/**
 * The backends a browser rank can start: solo for a job of one rank, else web (transport/web/),
 * whose data channels to other tabs the page opens (data_channel_requests.ts).
 */
function browserBackends(config: Config, page: PagePort): EngineBackends {
  const channels = new DataChannelRequests(page);
  return {
    table: {
      solo: soloBackend,
      web: browserWebBackend((peer, offerer, signal) => channels.open(peer, offerer, signal, config.startTimeoutMs)),
    },
    async choose(config) {
      if (config.size === 1) return 'solo';
      if (config.backend === 'web' || config.backend === 'auto') return 'web';
      throw new InvalidArgumentError(`a browser rank runs the web backend, not ${config.backend} (RINGREDUCE_BACKEND)`);
    },
  };
}

/** A dedicated worker's global scope, as far as this module uses it (the DOM lib types `self` as a Window). */
interface EngineScope {
  postMessage(message: EngineToPage): void;
  addEventListener(type: 'message' | 'error', listener: (event: MessageEvent) => void): void;
  removeEventListener(type: 'message', listener: (event: MessageEvent) => void): void;
}

const scope = globalThis as unknown as EngineScope;

function consoleLine(line: string): void {
  const text = line.trimEnd();
  if (text.includes(' ERROR: ')) console.error(text);
  else if (text.includes(' WARN: ')) console.warn(text);
  else console.info(text);
  scope.postMessage({ type: 'ringreduce:engine-output', text: line });
}

/** An uncaught error ends this engine: a caller blocked in a ...Sync call stops waiting (the page tells the program the rest). */
function stopOnCrash(init: EngineInit): void {
  scope.addEventListener('error', () => {
    if (init.mailbox) new SyncMailboxWriter(init.mailbox).stop();
    Atomics.add(init.signal, kSignalCompletions, 1);
    Atomics.notify(init.signal, kSignalCompletions);
  });
}

function start(event: MessageEvent): void {
  const message = event.data as PageToEngine;
  if (message?.type !== 'ringreduce:engine-init') return;
  scope.removeEventListener('message', start);
  const { init, port } = message;
  const { config } = init;
  stopOnCrash(init);
  // ringrun --dashboard: reports go through the page to ringrun, which passes them on (a page
  // cannot post across origins to the dashboard's server), naming the browser as their host.
  const reporting =
    config.dashboard === undefined
      ? undefined
      : reportEngine(
          {
            send: async (body) => {
              scope.postMessage({ type: 'ringreduce:engine-report', body });
              return true;
            },
            close: () => {},
          },
          { host: 'browser', pid: null },
          { rank: config.rank, size: config.size, timelineFile: undefined },
        );
  const logger = new Logger(`[rank ${config.rank}]`, config.logLevel, (line) => {
    consoleLine(line);
    reporting?.reporter.noteLogLine(line);
  });
  if (config.timeline) logger.warn(`a browser rank writes no timeline (it has no file system): ${config.timeline} is ignored`);
  runEngine({
    init,
    browser: true,
    logger,
    backends: browserBackends(config, scope as unknown as PagePort),
    listen(onMessage) {
      const listener = (e: MessageEvent) => onMessage(e.data as ToEngine);
      port.addEventListener('message', listener);
      port.start();
      return () => port.removeEventListener('message', listener);
    },
    post: (batch) => port.postMessage(batch),
    close: () => port.close(),
    ...(reporting && { observer: reporting.observer }),
  }).catch((error: unknown) => {
    // As if uncaught: the page's Worker gets an 'error' event, and the mailbox stops (stopOnCrash).
    reportError(error);
  });
}

scope.addEventListener('message', start);
