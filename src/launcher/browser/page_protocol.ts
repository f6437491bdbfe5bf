/**
 * The messages of a browser rank: between ringrun and the page that hosts the rank (JSON text
 * frames on the page's control WebSocket), and between the page and the rank's program worker
 * (postMessage). Imported by the launcher and by the page's scripts alike; types and constants
 * only.
 *
 * A page's life, as ringrun sees it:
 *   page → ringrun  join      (on connect; with the browser's name, to show in reports)
 *   ringrun → page  assigned  (the rank, its environment, the script URLs) or `refused` (why)
 *   page → ringrun  output*   (what the program printed) and, with --dashboard, report*
 *                             (its engine's reports), then exactly one `exit`
 *   ringrun → page  stop      (the job ends: the page stops its workers and says `exit`)
 * A control socket that closes before `exit` is the tab closed or crashed: the rank failed.
 */

/** Where the page's pieces live, under the job's token path (`/<token>/`). */
export const kPagePaths = {
  page: '',
  boot: 'boot.js',
  program: 'program.js',
  engine: 'engine.js',
  control: 'control',
  store: 'store',
} as const;

export interface JoinMessage {
  type: 'join';
  /** navigator.userAgent, shortened by ringrun to browser and OS. */
  userAgent: string;
}

export interface AssignedMessage {
  type: 'assigned';
  rank: number;
  /** The RINGREDUCE_* variables a Node rank would get, for the program's init(). */
  env: Record<string, string>;
  /** The words after the script on ringrun's command line (a Node rank's process.argv.slice(2)). */
  args: string[];
  /** Relative to the page. */
  programUrl: string;
  engineUrl: string;
}

export interface RefusedMessage {
  type: 'refused';
  reason: string;
}

export interface StopMessage {
  type: 'stop';
}

export interface OutputMessage {
  type: 'output';
  stream: 'stdout' | 'stderr';
  /** One or more whole lines, each ending in '\n'. */
  text: string;
}

export interface ExitMessage {
  type: 'exit';
  code: number;
  /** How the rank ended, in words, when it failed ("threw TypeError: ..."). */
  reason?: string;
}

/** With --dashboard: the engine's report (engine/reporting/dashboard_reporter.ts), which ringrun passes on. */
export interface ReportMessage {
  type: 'report';
  body: string;
}

export type PageToLauncher = JoinMessage | OutputMessage | ExitMessage | ReportMessage;
export type LauncherToPage = AssignedMessage | RefusedMessage | StopMessage;

/** Program worker → page: what the rank's prelude (rank_prelude.ts) reports (ringreduce's own: engine/threads/browser_protocol.ts). */
export type PreludeToPage =
  | { type: 'ringreduce:output'; stream: 'stdout' | 'stderr'; text: string }
  /** The program's module, top-level await included, has finished evaluating. */
  | { type: 'ringreduce:evaluated' }
  /** An uncaught error or unhandled rejection: the rank fails. */
  | { type: 'ringreduce:uncaught'; message: string }
  /** The answer to `ringreduce:ping`: everything the program did before it has been reported. */
  | { type: 'ringreduce:pong' };

/** Page → program worker: asks the prelude for a `ringreduce:pong`. */
export type PageToPrelude = { type: 'ringreduce:ping' };

/** The control socket's close code for "this page may not join" (bad token, no free rank). */
export const kRefusedCloseCode = 4403;
