/**
 * A Node rank's reports to `ringrun --dashboard` (dashboard_reporter.ts): a small HTTP POST
 * each, over one kept-alive socket that does not hold the process open, with a deadline.
 */
import { Agent, request } from 'node:http';
import type { DashboardTarget } from '../../observability/dashboard_target.js';
import type { ReportSender } from './dashboard_reporter.js';

const kTimeoutMs = 2000;

export function httpReportSender(target: DashboardTarget): ReportSender {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    send: (body) =>
      new Promise<boolean>((resolve) => {
        let settled = false;
        const done = (ok: boolean) => {
          if (settled) return;
          settled = true;
          resolve(ok);
        };
        try {
          const req = request(
            {
              host: target.host,
              port: target.port,
              path: target.path,
              method: 'POST',
              agent,
              timeout: kTimeoutMs,
              headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
            },
            (res) => {
              res.resume();
              res.on('end', () => done(res.statusCode === 204 || res.statusCode === 200));
              res.on('error', () => done(false));
            },
          );
          req.on('timeout', () => req.destroy());
          req.on('error', () => done(false));
          req.end(body);
        } catch {
          done(false);
        }
      }),
    close: () => agent.destroy(),
  };
}
