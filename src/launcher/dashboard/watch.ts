/**
 * `ringrun --dashboard`: runs a job (any of ringrun's ways: runJob, runMpi, elastic, restarts)
 * with the page served beside it. The run itself is untouched but for its RunIo: the ranks'
 * environment gets RINGREDUCE_DASHBOARD (where they report, observability/dashboard_target.ts),
 * and what the launcher logs (a rank's pid when spawned, its exit, the failure report) also goes
 * to the page. After the job, the page is served a little longer, until a viewer has seen how it
 * ended (at most kLingerMs); ringrun then exits with the job's code.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ingestUrl, kDashboardEnv } from '../../observability/dashboard_target.js';
import type { LaunchConfig, RunIo } from '../launch_config.js';
import { type DashboardAddress, isWildcard } from './address.js';
import { DashboardModel } from './model.js';
import { DashboardServer } from './server.js';

export const kLingerMs = 5000;

type Run = (config: LaunchConfig, io: RunIo) => Promise<number>;

/** `run`, watched by a dashboard served at `address`. */
export function withDashboard(address: DashboardAddress, run: Run): Run {
  return async (config, io) => {
    // Browser ranks come after the -np Node ranks (in an elastic job, within --max-np).
    const size = Math.max(config.np + (config.browser?.count ?? 0), config.elastic?.maxNp ?? 0);
    const model = new DashboardModel(size, [config.command, ...config.args].join(' '), hostname());
    const viewToken = randomBytes(16).toString('hex');
    const ingestToken = randomBytes(16).toString('hex');
    let server: DashboardServer;
    try {
      server = await DashboardServer.start({
        host: address.host,
        port: address.port,
        model,
        viewToken,
        ingestToken,
      });
    } catch (error) {
      io.log(`--dashboard ${address.host}:${address.port}: cannot listen: ${(error as Error).message}`);
      return 1;
    }
    const wildcard = isWildcard(address.host);
    const allLocal = config.hosts === undefined;
    // Ranks on other hosts reach a server bound to every interface by this host's name.
    const reportHost = wildcard ? (allLocal ? '127.0.0.1' : hostname()) : address.host;
    io.log(`dashboard: ${server.pageUrl(wildcard ? hostname() : address.host)}`);
    const watched: RunIo = {
      ...io,
      env: { ...io.env, [kDashboardEnv]: ingestUrl(reportHost, server.port, ingestToken) },
      log: (message) => {
        model.launcherLine(message);
        io.log(message);
      },
      debug: (message) => {
        // Only what the page shows (pids, exits, errors) of the verbose messages.
        if (/^(?:error of )?rank \d+[ :]/.test(message)) model.launcherLine(message);
        io.debug(message);
      },
    };
    let code = 1;
    try {
      code = await run(config, watched);
      return code;
    } finally {
      model.ended(code);
      await server.linger(kLingerMs);
      await server.close();
    }
  };
}
