/**
 * The hosts of an elastic job (elastic_driver.ts): the slots each offers (-H, --hostfile, or the
 * discovery script's latest lines) and how often it has failed.
 *
 * The blacklist (Horovod's, with a threshold): a host fails when one of its workers exits with
 * an error, is lost (cut off: it no longer reaches the store), or, started as a new worker, does
 * not reach the store within the start-up timeout; several workers failing in one generation
 * count once. From its kBlacklistAfter-th failure on, each failure keeps the host out for a
 * cool-down of kCooldownMs, doubled with every further failure (10 s, 20 s, 40 s, ... at most
 * kMaxCooldownMs); then it may get new workers again. Failures are never forgotten.
 */
import { InvalidArgumentError } from '../core/errors.js';
import { type HostSlots, parseHostList } from './hosts.js';

/** How this machine is known, whatever name or address the lists give it. */
export const kThisHost = 'localhost';
export const kBlacklistAfter = 2;
export const kCooldownMs = 10_000;
export const kMaxCooldownMs = 600_000;

interface HostRecord {
  failures: number;
  /** The generations (or start-up rounds) already counted: one failure each. */
  counted: Set<number>;
  /** performance.now() at which the cool-down ends (0: none). */
  until: number;
}

export class ElasticHosts {
  /** The hosts listed now, in order, with their slots. */
  private slots = new Map<string, number>();
  private readonly records = new Map<string, HostRecord>();

  constructor(private readonly isLocal: (host: string) => boolean) {}

  /** The name a host is kept under: kThisHost for this machine. */
  key(host: string): string {
    return this.isLocal(host) ? kThisHost : host;
  }

  /** Replaces the hosts listed; returns those that were listed and are not any more. */
  list(hosts: readonly HostSlots[]): string[] {
    const next = new Map<string, number>();
    for (const { host, slots } of hosts) {
      const key = this.key(host);
      next.set(key, (next.get(key) ?? 0) + slots);
    }
    const gone = [...this.slots.keys()].filter((host) => !next.has(host));
    this.slots = next;
    return gone;
  }

  listed(host: string): boolean {
    return this.slots.has(host);
  }

  /** Whether any host listed is another machine. */
  anyRemote(): boolean {
    return [...this.slots.keys()].some((host) => host !== kThisHost);
  }

  /**
   * Counts a failure of `host` in round `round` (a generation number; once per round). Returns
   * the cool-down it starts (ms), or undefined when the host is not blacklisted by it.
   */
  fail(host: string, round: number, now: number): number | undefined {
    const record = this.records.get(host) ?? { failures: 0, counted: new Set<number>(), until: 0 };
    this.records.set(host, record);
    if (record.counted.has(round)) return undefined;
    record.counted.add(round);
    record.failures++;
    if (record.failures < kBlacklistAfter) return undefined;
    const cooldown = Math.min(kCooldownMs * 2 ** (record.failures - kBlacklistAfter), kMaxCooldownMs);
    record.until = now + cooldown;
    return cooldown;
  }

  failures(host: string): number {
    return this.records.get(host)?.failures ?? 0;
  }

  blacklisted(host: string, now: number): boolean {
    return (this.records.get(host)?.until ?? 0) > now;
  }

  /** The free slots of the listed hosts not in a cool-down, in list order, given how many workers each runs. */
  free(running: ReadonlyMap<string, number>, now: number): { host: string; free: number }[] {
    const out: { host: string; free: number }[] = [];
    for (const [host, slots] of this.slots) {
      const free = slots - (running.get(host) ?? 0);
      if (free > 0 && !this.blacklisted(host, now)) out.push({ host, free });
    }
    return out;
  }
}

/** The discovery script's output: `host[:slots]` lines (`#` comments, blank lines ignored), as -H's items. */
export function parseDiscovered(output: string): HostSlots[] {
  const hosts: HostSlots[] = [];
  for (const line of output.split('\n')) {
    const text = line.trim();
    if (text === '' || text.startsWith('#')) continue;
    if (text.includes(',') || text.startsWith('-')) throw new InvalidArgumentError(`line '${text}' is not host[:slots]`);
    hosts.push(...parseHostList(text, `line '${text}'`));
  }
  return hosts;
}
