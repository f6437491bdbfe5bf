/**
 * The messages between a browser rank's three threads: the page's main thread (ringrun's page;
 * launcher/browser/page/engine_host.ts answers for it), the program worker (the user's program,
 * in a module Web Worker; platform/browser/ speaks for ringreduce there) and the engine worker
 * (web_worker.ts). Types and constants only.
 *
 * The engine worker is the page's, not the program's: the page must later hand it
 * RTCDataChannels, which Chromium transfers only right after creating them, from the thread
 * that made them. So:
 *
 *   page → program   env            first: the rank's environment (what a Node rank finds in
 *                                   process.env); init() waits for it
 *   program → page   start-engine   the engine's init data (config, shared signal, stats and
 *                                   sync mailbox) and one end of a MessageChannel
 *   page → engine    engine-init    the same, to a new Worker(engineUrl, { type: 'module' })
 *   program ⇄ engine                from then on over that channel, as a Node caller and its
 *                                   worker thread talk (worker_protocol.ts): submissions and
 *                                   shutdown one way, batches of completions the other
 *   page → program   engine-failed  the engine's worker did not load or threw
 *   engine → page    engine-output  a line the engine logged, for the page to pass on
 *   engine → page    engine-report  a report for ringrun's dashboard (with --dashboard)
 *   program → page   stop-engine    the engine has closed: the page terminates its worker
 *   program → page   rank-closed    shutdown() has resolved: the rank is done (a re-form of an
 *                                   elastic job stops one engine and starts the next)
 *
 * Every message between the page and a worker carries `type` with the `ringreduce:` prefix,
 * so that a program's own messages on the same channel are told apart.
 */
import type { EngineInit } from './worker_protocol.js';

/** Page → program worker, first of all: the RINGREDUCE_* variables a Node rank would get from ringrun. */
export interface EnvMessage {
  type: 'ringreduce:env';
  env: Record<string, string>;
}

/** Program worker → page: start an engine worker for this rank. */
export interface StartEngineMessage {
  type: 'ringreduce:start-engine';
  /** Names this engine in the messages about it (a program may start another after shutdown()). */
  engine: string;
  init: EngineInit;
  /** The engine's end of the channel to the program. */
  port: MessagePort;
}

/** Program worker → page: the engine has closed; terminate its worker. */
export interface StopEngineMessage {
  type: 'ringreduce:stop-engine';
  engine: string;
}

/** Page → program worker: the engine's worker failed (its script did not load, or it threw). */
export interface EngineFailedMessage {
  type: 'ringreduce:engine-failed';
  engine: string;
  message: string;
}

/** Program worker → page: the rank has shut down for good (an elastic re-form only stops an engine). */
export interface RankClosedMessage {
  type: 'ringreduce:rank-closed';
}

/** Page → engine worker: what it starts with. */
export interface EngineInitMessage {
  type: 'ringreduce:engine-init';
  init: EngineInit;
  port: MessagePort;
}

/** Engine worker → page: a line its logger wrote (it also goes to the console). */
export interface EngineOutputMessage {
  type: 'ringreduce:engine-output';
  text: string;
}

export type PageToProgram = EnvMessage | EngineFailedMessage;
export type ProgramToPage = StartEngineMessage | StopEngineMessage | RankClosedMessage;
export type PageToEngine = EngineInitMessage;
/** Engine worker → page: a report for ringrun's dashboard (engine/reporting/dashboard_reporter.ts), JSON. */
export interface EngineReportMessage {
  type: 'ringreduce:engine-report';
  body: string;
}

export type EngineToPage = EngineOutputMessage | EngineReportMessage;

/** How long init() waits for the page's env message. */
export const kEnvDeadlineMs = 10_000;
