/**
 * `ringrun --dashboard` from an engine's entry (worker.ts on Node, web_worker.ts in a browser):
 * the reporter, which reads the engine once it runs, and the observer through which runEngine
 * tells it so, notes a failed start and closes it at the end.
 */

import type { Engine } from '../engine.js';
import type { EngineObserver } from '../threads/engine_main.js';
import { DashboardReporter, type ReporterIdentity, type ReportSender } from './dashboard_reporter.js';
import { readStats } from './stats.js';

export interface EngineReporting {
  reporter: DashboardReporter;
  observer: EngineObserver;
}

export function reportEngine(
  sender: ReportSender,
  identity: ReporterIdentity,
  rank: { rank: number; size: number; timelineFile: string | undefined },
): EngineReporting {
  let running: Engine | undefined;
  const reporter = new DashboardReporter(sender, identity, {
    ...rank,
    stats: () => (running ? readStats(running.stats.buffer) : undefined),
    pending: (limit) => running?.pendingCalls(limit) ?? [],
    condition: () => running?.condition ?? { failure: undefined, closing: false },
  });
  const observer: EngineObserver = {
    started: (engine) => {
      running = engine;
    },
    failed: (error) => {
      reporter.noteLogLine(` ERROR: ${error.message}`);
      void reporter.close();
    },
    stopped: () => reporter.close(),
  };
  return { reporter, observer };
}
