/**
 * The engine's host on Node, wherever its thread is: logging to stderr, every backend of
 * transport/backends.ts, the timeline file, autotune's log, V8's collector, and the reporter to
 * ringrun's dashboard when it watches. The channel to the caller is the thread's own: a worker's
 * ports (worker.ts) or direct calls on the caller's thread (platform/node/engine_in_thread.ts).
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { Logger } from '../../core/logger.js';
import { v8Collector } from '../../core/v8_collector.js';
import { openAutotuneLog } from '../../observability/autotune_log.js';
import { dashboardTarget } from '../../observability/dashboard_target.js';
import { openTimeline, timelinePathFor } from '../../observability/timeline.js';
import { chooseBackend, kBackends } from '../../transport/backends.js';
import { httpReportSender } from '../reporting/dashboard_http.js';
import { reportEngine } from '../reporting/engine_reporting.js';
import type { EngineHost, EngineObserver } from './engine_main.js';
import type { EngineInit } from './worker_protocol.js';

/** How the engine and its caller talk: the part of the host that depends on the engine's thread. */
export type EngineChannel = Pick<EngineHost, 'listen' | 'takePosted' | 'post' | 'close' | 'reportSoon'>;

/** The Node host of an engine started with `init`, talking over `channel`; `observer` also hears the engine's life. */
export function nodeEngineHost(init: EngineInit, channel: EngineChannel, observer?: EngineObserver): EngineHost {
  const { config } = init;
  const dashboard = dashboardTarget(config.dashboard);
  /** Reports to ringrun's dashboard, when it watches (it sees the warnings and errors logged here too). */
  const reporting =
    dashboard &&
    reportEngine(
      httpReportSender(dashboard),
      { host: hostname(), pid: process.pid },
      {
        rank: config.rank,
        size: config.size,
        timelineFile:
          config.timeline && resolve(config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline),
      },
    );
  const observers = [reporting?.observer, observer].filter((o): o is EngineObserver => o !== undefined);
  return {
    init,
    logger: new Logger(`[rank ${config.rank}]`, config.logLevel, (line) => {
      process.stderr.write(line);
      reporting?.reporter.noteLogLine(line);
    }),
    backends: { table: kBackends, choose: chooseBackend },
    ...channel,
    openTimeline,
    openAutotuneLog,
    collect: v8Collector(),
    ...(observers.length > 0 && { observer: allOf(observers) }),
  };
}

/** One observer telling each of `observers`, in order. */
function allOf(observers: readonly EngineObserver[]): EngineObserver {
  return {
    started: (engine) => {
      for (const o of observers) o.started?.(engine);
    },
    failed: (error) => {
      for (const o of observers) o.failed?.(error);
    },
    stopped: async () => {
      for (const o of observers) await o.stopped?.();
    },
  };
}
