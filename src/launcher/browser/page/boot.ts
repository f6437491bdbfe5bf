/**
 * The page of a browser rank (runs on the page's main thread): joins the job over the control
 * socket, starts the rank's program in a module Web Worker with the environment ringrun gave
 * it, starts the rank's engine worker when the program asks (engine_host.ts), forwards what the
 * program prints, and tells ringrun how the rank ended.
 *
 * When a rank has ended: its program's module has finished evaluating and its shutdown() has
 * resolved (a page cannot see, as Node does, that nothing is left to run: a program that calls
 * `main()` without awaiting it has evaluated long before it calls init(), and an elastic job
 * stops one engine and starts the next at each re-form), or it failed (an uncaught error, a
 * module that does not load). The main thread does no work of the rank: a hidden tab's throttled timers do not slow
 * the rank, whose program and engine run in workers.
 */

import type { ProgramToPage } from '../../../engine/threads/browser_protocol.js';
import {
  type AssignedMessage,
  kPagePaths,
  type LauncherToPage,
  type PageToLauncher,
  type PageToPrelude,
  type PreludeToPage,
} from '../page_protocol.js';
import { type DataChannelService, serveDataChannels } from './data_channels.js';
import { type EngineHost, hostEngines } from './engine_host.js';

const status = document.getElementById('status') as HTMLElement;
const base = location.pathname.endsWith('/') ? location.pathname : `${location.pathname}/`;
const control = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${base}${kPagePaths.control}`);
/** How long a rank that ringrun stops may still run (and print) before its workers are terminated. */
const kStopGraceMs = 1000;
let rank: number | undefined;
let ended = false;

function send(message: PageToLauncher): void {
  if (control.readyState === WebSocket.OPEN) control.send(JSON.stringify(message));
}

function show(text: string): void {
  status.textContent = text;
}

control.addEventListener('open', () => send({ type: 'join', userAgent: navigator.userAgent }));
// The tab closes: its workers go first, then its peer connections (engine_host's `stopped`), so
// that its engine never sees its own links close and blames a peer.
addEventListener('pagehide', stopWorkers);
control.addEventListener('close', (event) => {
  if (!ended) show(rank === undefined ? `Not joined: ${event.reason || 'the job is not running'}` : 'ringrun has gone.');
  stopWorkers();
});
control.addEventListener('message', (event) => {
  const message = JSON.parse(String(event.data)) as LauncherToPage;
  if (message.type === 'assigned') start(message);
  else if (message.type === 'refused') show(`Not joined: ${message.reason}`);
  else if (message.type === 'stop') {
    // As SIGTERM to a Node rank: the program may still report what happened (a peer's failure
    // it is handling) for a moment, then its workers are terminated.
    setTimeout(() => finish(143, 'stopped by ringrun'), kStopGraceMs);
  }
});

let program: Worker | undefined;
let engines: EngineHost | undefined;
const channels = new Map<Worker, DataChannelService>();
let evaluated = false;
/** The program's shutdown() has resolved (a re-form of an elastic job stops an engine, not the rank). */
let closed = false;

function start(assigned: AssignedMessage): void {
  rank = assigned.rank;
  document.title = `ringreduce rank ${rank}`;
  show(`Rank ${rank}: running.`);
  const programUrl = new URL(assigned.programUrl, location.href);
  // The program's arguments, as a Node rank has them in process.argv (platform/browser reads them back).
  programUrl.searchParams.set('argv', JSON.stringify(assigned.args));
  program = new Worker(programUrl, { type: 'module', name: `ringreduce rank ${rank}` });
  engines = hostEngines(program, new URL(assigned.engineUrl, location.href), {
    env: assigned.env,
    output: (text) => send({ type: 'output', stream: 'stderr', text }),
    report: (body) => send({ type: 'report', body }),
    started: (engine) => channels.set(engine, serveDataChannels(engine)),
    stopped: (engine) => {
      channels.get(engine)?.closeAll();
      channels.delete(engine);
      maybeFinished();
    },
  });
  program.addEventListener('message', (event: MessageEvent<PreludeToPage | ProgramToPage>) => {
    const message = event.data;
    if (message?.type === 'ringreduce:rank-closed') {
      closed = true;
      maybeFinished();
    } else if (message?.type === 'ringreduce:output') send({ type: 'output', stream: message.stream, text: message.text });
    else if (message?.type === 'ringreduce:evaluated') {
      evaluated = true;
      maybeFinished();
    } else if (message?.type === 'ringreduce:pong') {
      if (finished()) finish(0);
    } else if (message?.type === 'ringreduce:uncaught') {
      send({ type: 'output', stream: 'stderr', text: `${message.message}\n` });
      finish(1, `failed: ${firstLine(message.message)}`);
    }
  });
  program.addEventListener('error', (event) => {
    // A module that does not load or throws while it is evaluated.
    event.preventDefault();
    const text = event.message || 'the program could not be loaded';
    send({ type: 'output', stream: 'stderr', text: `${text}\n` });
    finish(1, `failed: ${firstLine(text)}`);
  });
}

/** Done once both hold; a ping first lets whatever the program did right before reach us. */
function maybeFinished(): void {
  if (finished()) program?.postMessage({ type: 'ringreduce:ping' } satisfies PageToPrelude);
}

function finished(): boolean {
  return evaluated && closed && engines?.running === 0;
}

function finish(code: number, reason?: string): void {
  if (ended) return;
  ended = true;
  stopWorkers();
  send(reason === undefined ? { type: 'exit', code } : { type: 'exit', code, reason });
  show(code === 0 ? `Rank ${rank}: finished.` : `Rank ${rank}: ${reason ?? `ended with code ${code}`}.`);
  control.close(1000);
}

function stopWorkers(): void {
  program?.terminate();
  engines?.stop();
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? text;
}
