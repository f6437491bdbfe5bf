/** `ringrun --dashboard [host:]port`: where the page is served. */
import { isIP } from 'node:net';
import { InvalidArgumentError } from '../../core/errors.js';

export interface DashboardAddress {
  /** The address the server binds: 127.0.0.1 unless the user names another. */
  host: string;
  /** 0: a free port. */
  port: number;
}

export const kDefaultDashboardHost = '127.0.0.1';

/**
 * The flag's value: absent or empty (the defaults), `port`, `host:port` or `[v6]:port`. A value
 * that is none of these is most likely the command that the flag swallowed
 * (`ringrun -np 2 --dashboard node train.js`): the error says how to write it.
 */
export function parseDashboardAddress(value: string | true | undefined): DashboardAddress {
  if (value === undefined || value === true || value === '') return { host: kDefaultDashboardHost, port: 0 };
  const match = /^(?:\[([^\]]+)\]:|([^:[\]]+):)?(\d{1,5})$/.exec(value);
  const port = Number(match?.[3]);
  const host = match?.[1] ?? match?.[2] ?? kDefaultDashboardHost;
  if (match === null || port > 65535 || (match[1] !== undefined && isIP(host) !== 6)) {
    throw new InvalidArgumentError(
      `--dashboard takes [host:]port (e.g. 8080 or 0.0.0.0:8080), got '${value}'; for the defaults put --dashboard before another option, or write --dashboard=`,
    );
  }
  return { host, port };
}

/** Whether `host` binds every interface (0.0.0.0, ::): the ranks then reach the server by this host's name. */
export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}
