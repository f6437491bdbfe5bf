/**
 * Where a rank reports to `ringrun --dashboard`: the launcher hands every rank one variable,
 * RINGREDUCE_DASHBOARD, holding the URL it accepts reports on, whose last path segment is a
 * random token (only the ranks know it; the page's viewers get another one). Unset: the rank
 * reports nowhere and starts nothing.
 *
 * This variable is read here rather than in core/config.ts because it is the launcher's private
 * channel to its own dashboard, not a setting of the job: nothing in the engine depends on it.
 */

/** The variable ringrun sets for every rank of a job run with --dashboard. */
export const kDashboardEnv = 'RINGREDUCE_DASHBOARD';

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

/** The target in `env`, or undefined when unset or not an http URL of that shape (then nothing is reported). */
export function dashboardTargetFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): DashboardTarget | undefined {
  const text = env[kDashboardEnv];
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
