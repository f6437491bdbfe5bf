/**
 * Where a rank reports to `ringrun --dashboard`: the launcher hands every rank one variable,
 * RINGREDUCE_DASHBOARD, holding the URL it accepts reports on, whose last path segment is a
 * random token (only the ranks know it; the page's viewers get another one). Unset: the rank
 * reports nowhere and starts nothing.
 * core/config.ts reads the variable (Config.dashboard); this module parses it.
 */

import { kEnv } from '../core/env_names.js';

/** The variable ringrun sets for every rank of a job run with --dashboard. */
export const kDashboardEnv = kEnv.dashboard;

/** The reports' path on the dashboard's server, before the token. */
export const kIngestPath = '/ingest/';

export interface DashboardTarget {
  host: string;
  port: number;
  /** The request path, token included. */
  path: string;
}

/** The URL ringrun gives its ranks for a dashboard listening on `host`:`port`. */
export function ingestUrl(host: string, port: number, token: string): string {
  const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${h}:${port}${kIngestPath}${token}`;
}

/** The target `text` names, or undefined when unset or not an http URL of that shape (then nothing is reported). */
export function dashboardTarget(text: string | undefined): DashboardTarget | undefined {
  if (!text) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' || !url.pathname.startsWith(kIngestPath) || url.pathname.length <= kIngestPath.length) {
    return undefined;
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port: Number(url.port || 80), path: url.pathname };
}
