/**
 * The page's side of a browser rank's engines (engine/threads/browser_protocol.ts), on the page's main
 * thread: when the program worker asks for an engine, the page starts it, as a module Web Worker
 * of its own (the page must later hand it RTCDataChannels, which Chromium transfers only from the
 * thread that made them, right after), and hands it the init data and the port the program
 * sent. The page's boot script calls hostEngines once it has started the program worker.
 *
 * @example
 * const program = new Worker(programUrl, { type: 'module' });
 * const host = hostEngines(program, engineUrl, { env, output: (text) => sendStderr(text) });
 * // ...when the job ends: host.stop();
 */
import type { EngineToPage, PageToEngine, PageToProgram, ProgramToPage } from '../../../engine/threads/browser_protocol.js';

export interface EngineHostOptions {
  /** The rank's environment: posted to the program worker at once, before anything else (its init() waits for it). */
  env?: Record<string, string>;
  /** A line an engine logged, ending in '\n' (it also went to the console): ringrun's page passes it on as the rank's stderr. */
  output?(text: string): void;
  /** A report for ringrun's dashboard from an engine (JSON): ringrun's page passes it on. */
  report?(body: string): void;
  /** An engine's worker has started (the page serves its data channels). */
  started?(engine: Worker): void;
  /** An engine's worker has been terminated: the program stopped it, or it failed. */
  stopped?(engine: Worker): void;
}

export interface EngineHost {
  /** Engines started and not yet stopped. */
  readonly running: number;
  /** Engines started so far (a program may start another after shutdown()). */
  readonly started: number;
  /** Stops answering the program and terminates its engines. */
  stop(): void;
}

function isMessage<T extends { type: string }>(data: unknown): data is T {
  return typeof data === 'object' && data !== null && typeof (data as { type?: unknown }).type === 'string';
}

/** Answers `program`'s requests for engines, started from `engineUrl` (dist/browser/engine_worker.js as served). */
export function hostEngines(program: Worker, engineUrl: string | URL, options: EngineHostOptions = {}): EngineHost {
  const engines = new Map<string, Worker>();
  let started = 0;
  const tell = (message: PageToProgram) => program.postMessage(message);
  const end = (engine: string) => {
    const worker = engines.get(engine);
    if (worker === undefined) return;
    worker.terminate();
    engines.delete(engine);
    options.stopped?.(worker);
  };
  const failed = (engine: string, message: string) => {
    end(engine);
    tell({ type: 'ringreduce:engine-failed', engine, message });
  };
  const start = (engine: string, message: PageToEngine) => {
    let worker: Worker;
    try {
      worker = new Worker(engineUrl, { type: 'module', name: `ringreduce engine ${engine}` });
    } catch (error) {
      failed(engine, `could not start ${String(engineUrl)}: ${(error as Error).message}`);
      return;
    }
    engines.set(engine, worker);
    started++;
    worker.addEventListener('error', (event) => {
      // An ErrorEvent when the engine threw; a plain Event when its script did not load.
      const what = event instanceof ErrorEvent ? event.message : `its script ${String(engineUrl)} did not load`;
      failed(engine, what);
    });
    worker.addEventListener('message', (event) => {
      if (!isMessage<EngineToPage>(event.data)) return;
      if (event.data.type === 'ringreduce:engine-output') options.output?.(event.data.text);
      else if (event.data.type === 'ringreduce:engine-report') options.report?.(event.data.body);
    });
    worker.postMessage(message, [message.port]);
    options.started?.(worker);
  };
  const onProgram = (event: MessageEvent) => {
    if (!isMessage<ProgramToPage>(event.data)) return;
    const message = event.data;
    if (message.type === 'ringreduce:start-engine') {
      start(message.engine, { type: 'ringreduce:engine-init', init: message.init, port: message.port });
    } else if (message.type === 'ringreduce:stop-engine') end(message.engine);
  };
  program.addEventListener('message', onProgram);
  if (options.env) tell({ type: 'ringreduce:env', env: options.env });
  return {
    get running() {
      return engines.size;
    },
    get started() {
      return started;
    },
    stop() {
      program.removeEventListener('message', onProgram);
      for (const engine of [...engines.keys()]) end(engine);
    },
  };
}
