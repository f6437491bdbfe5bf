/**
 * Hosts and slots: `-H host1:2,host2:4` and `--hostfile` (lines of `host slots=N`, as
 * mpirun's), and which of them is this machine. Ranks are placed host by host (placement.ts).
 */
import { hostname, networkInterfaces } from 'node:os';
import { InvalidArgumentError } from '../core/errors.js';

export interface HostSlots {
  host: string;
  slots: number;
}

function slotsOf(text: string, where: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) {
    throw new InvalidArgumentError(`${where}: slots must be a positive integer, got '${text}'`);
  }
  return Number(text);
}

function checkHost(host: string, where: string): string {
  if (host === '' || /[\s'"`$\\;|&<>]/.test(host)) throw new InvalidArgumentError(`${where}: bad host name '${host}'`);
  return host;
}

/** `host`, `host:slots`, `[v6::addr]:slots`, comma-separated. A host without slots has 1. */
export function parseHostList(text: string, flag = '-H'): HostSlots[] {
  const hosts = text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map((item) => {
      const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(item);
      if (bracketed)
        return {
          host: checkHost(bracketed[1] ?? '', flag),
          slots: bracketed[2] === undefined ? 1 : slotsOf(bracketed[2], `${flag} ${item}`),
        };
      const colon = item.lastIndexOf(':');
      // A bare IPv6 address has several colons and no slots.
      if (colon < 0 || item.indexOf(':') !== colon) return { host: checkHost(item, flag), slots: 1 };
      return { host: checkHost(item.slice(0, colon), flag), slots: slotsOf(item.slice(colon + 1), `${flag} ${item}`) };
    });
  if (hosts.length === 0) throw new InvalidArgumentError(`${flag} lists no hosts`);
  return merge(hosts);
}

/** Lines of `host [slots=N]`; `#` starts a comment. `max_slots=` is accepted and ignored. */
export function parseHostfile(text: string, file: string): HostSlots[] {
  const hosts: HostSlots[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    const where = `${file}:${index + 1}`;
    const [host = '', ...fields] = line.split(/\s+/);
    let slots = 1;
    for (const field of fields) {
      const match = /^(slots|max_slots)=(.*)$/.exec(field);
      if (match === null) throw new InvalidArgumentError(`${where}: expected 'host slots=N', got '${line}'`);
      if (match[1] === 'slots') slots = slotsOf(match[2] ?? '', where);
    }
    hosts.push({ host: checkHost(host, where), slots });
  });
  if (hosts.length === 0) throw new InvalidArgumentError(`${file} lists no hosts`);
  return merge(hosts);
}

/** A host listed twice gets the sum of its slots, at its first position. */
function merge(hosts: HostSlots[]): HostSlots[] {
  const byName = new Map<string, HostSlots>();
  for (const { host, slots } of hosts) {
    const seen = byName.get(host);
    if (seen) seen.slots += slots;
    else byName.set(host, { host, slots });
  }
  return [...byName.values()];
}

/**
 * Whether `host` names this machine: `localhost`, its host name, or one of its interface
 * addresses (127.0.0.1 included). Other loopback addresses (127.0.0.2) count as other hosts,
 * which the tests use.
 */
export function isLocalHost(host: string): boolean {
  if (host === 'localhost' || host === hostname() || host === hostname().split('.')[0]) return true;
  for (const addresses of Object.values(networkInterfaces())) {
    if (addresses?.some((a) => a.address === host)) return true;
  }
  return false;
}
