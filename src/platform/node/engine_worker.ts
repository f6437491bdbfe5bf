/**
 * The engine's thread on Node: a worker thread running engine/threads/worker.ts. Completions arrive on a
 * MessagePort of their own rather than the worker's channel, because a caller blocked in a
 * ...Sync call cannot run its event loop: it sleeps in Atomics.wait on the shared counter that
 * the engine bumps after each post, and then drains the port itself with receiveMessageOnPort.
 *
 * The worker runs a file, so the flags that describe the main program's entry (`node
 * --input-type=module -e ...`, stdin, `-p`) must not reach it: a worker given --input-type
 * fails to start. They are filtered out of the inherited execArgv (workerExecArgv).
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { RingReduceError, ShutdownError } from '../../core/errors.js';
import type { EngineInit, FromEngine, ToEngine, WorkerInit } from '../../engine/threads/worker_protocol.js';
import type { EngineEvents, EngineThread } from '../platform.js';

const kWorkerUrl = new URL('../../engine/threads/worker.js', import.meta.url);

/** Flags that say what the main program is (code from -e, stdin, a REPL, a test run), with their value if separate. */
const kEntryFlags: ReadonlyMap<string, boolean> = new Map([
  ['--input-type', true],
  ['-e', true],
  ['--eval', true],
  ['-p', true],
  ['-pe', true],
  ['--print', true],
  ['-i', false],
  ['--interactive', false],
  ['-c', false],
  ['--check', false],
  ['--watch', false],
  ['--watch-path', true],
  ['--watch-preserve-output', false],
  ['--test', false],
  ['-', false],
]);

/**
 * The execArgv for the engine's worker: undefined (inherit the process's, as Node does by
 * default) unless it holds flags about the main program's entry, which are then left out,
 * with the values they take.
 */
export function workerExecArgv(execArgv: readonly string[]): string[] | undefined {
  const kept: string[] = [];
  let removed = false;
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i] as string;
    const eq = arg.indexOf('=');
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const takesValue = kEntryFlags.get(flag);
    if (takesValue === undefined && !flag.startsWith('--test-')) {
      kept.push(arg);
      continue;
    }
    removed = true;
    if (takesValue === true && eq < 0) i++; // its value is the next word
  }
  return removed ? kept : undefined;
}

/**
 * A worker with `execArgv`; flags a worker refuses (V8's and the process's, which Node lets a
 * worker inherit silently but not be given) are dropped as Node names them.
 */
function startWorker(workerData: WorkerInit, transferList: MessagePort[]): Worker {
  let execArgv = workerExecArgv(process.execArgv);
  for (let attempt = 0; ; attempt++) {
    try {
      return new Worker(kWorkerUrl, { workerData, transferList, ...(execArgv && { execArgv }) });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || !execArgv || attempt > 0) throw error;
      const refused = new Set(((error as Error).message.split(': ')[1] ?? '').split(', '));
      execArgv = execArgv.filter((arg, i, all) => {
        if (refused.has(arg) || refused.has(arg.split('=')[0] as string)) return false;
        const previous = all[i - 1];
        // The separate value of a refused flag (--stack-size 500).
        return !(previous !== undefined && refused.has(previous) && !previous.includes('=') && !arg.startsWith('-'));
      });
    }
  }
}

/** Starts engine/threads/worker.ts in a worker thread. */
export function startEngineWorker(init: EngineInit, events: EngineEvents): EngineThread {
  const { port1, port2 } = new MessageChannel();
  const worker = startWorker({ ...init, port: port2 }, [port2]);
  const drain = (): FromEngine[] => {
    const taken: FromEngine[] = [];
    for (let m = receiveMessageOnPort(port1); m !== undefined; m = receiveMessageOnPort(port1)) {
      taken.push(...(m.message as FromEngine[]));
    }
    return taken;
  };
  port1.on('message', (batch: FromEngine[]) => events.messages(batch));
  worker.on('error', (error) => events.gone(new RingReduceError(`the ringreduce engine thread crashed: ${error.message}`)));
  worker.on('exit', (code) => {
    // 'exit' can overtake the port's last messages (an init failure, 'closed'): they are read first.
    const last = drain();
    if (last.length > 0) events.messages(last);
    events.gone(new ShutdownError(`the ringreduce engine thread exited (code ${code})`));
  });
  return {
    post: (message: ToEngine) => worker.postMessage(message),
    takeSync: drain,
    keepAlive(alive) {
      if (alive) {
        worker.ref();
        port1.ref();
      } else {
        worker.unref();
        port1.unref();
      }
    },
    terminate: async () => {
      await worker.terminate();
    },
  };
}
