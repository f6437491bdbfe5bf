/**
 * `ringrun --dashboard` with browser ranks: a tab's engine cannot post to the dashboard's server
 * (another origin), so its reports come over its page's control socket, and ringrun posts them
 * on, with the browser (as BrowserRank names it) as the host and no pid.
 */
import { kEnv } from '../../core/env_names.js';
import { httpReportSender } from '../../engine/reporting/dashboard_http.js';
import { dashboardTarget } from '../../observability/dashboard_target.js';
import type { BrowserRank } from './browser_rank.js';

/** Passes browser ranks' reports to the dashboard `env` names (RINGREDUCE_DASHBOARD); undefined without one. */
export function reportForwarder(
  env: Readonly<Record<string, string | undefined>>,
): ((rank: BrowserRank, body: string) => void) | undefined {
  const target = dashboardTarget(env[kEnv.dashboard]);
  if (target === undefined) return undefined;
  const sender = httpReportSender(target);
  return (rank, body) => {
    let report: Record<string, unknown>;
    try {
      report = JSON.parse(body) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof report !== 'object' || report === null) return;
    void sender.send(JSON.stringify({ ...report, rank: rank.rank, host: rank.host, pid: null }));
  };
}

/** RINGREDUCE_DASHBOARD for a tab, when ringrun watches the job: its engine then reports (through its page). */
export function dashboardEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const url = env[kEnv.dashboard];
  return url ? { [kEnv.dashboard]: url } : {};
}
