/**
 * The stall inspector, run by the coordinator on rank 0: names the ranks that hold the job up.
 *
 * How it works: the coordinator keeps, per tensor name, which ranks have submitted it and
 * since when; the inspector reads that (through `waiting()`) and keeps one timer, for the
 * earliest moment something is due, re-armed whenever the coordinator's state changes. An idle
 * job, with nothing waiting, has no timer at all.
 * - After `warningMs` a name has waited for some ranks, it logs one warning (per batch of names
 *   that became due together) listing, per missing rank, the tensors it has not submitted.
 * - After `timeoutMs` (0: never), or the name's own deadline (the callers' option 'timeoutMs'),
 *   the name is failed on every rank that submitted it with a TimeoutError that names the ranks
 *   that did and did not submit it; the job goes on.
 * This is Horovod's stall inspector (its check and shutdown times), reduced to the one place
 * that knows who submitted what.
 */
import type { Logger } from '../core/logger.js';
import { unrefTimer } from '../core/soon.js';

/** One tensor name the coordinator is waiting on: when it was first submitted, and by whom. */
export interface WaitingName {
  since: number;
  /** Per rank: defined once that rank has submitted the name. */
  requests: readonly unknown[];
  /** The callers' deadline for this name (option 'timeoutMs'), which replaces the inspector's timeout. */
  timeoutMs?: number;
}

export interface StalledName {
  name: string;
  /** The TimeoutError message every rank's collective rejects with. */
  message: string;
  /** The ranks that submitted it: the collectives that fail. */
  submitted: number[];
}

export interface StallInspectorOptions {
  warningMs: number;
  timeoutMs: number;
  logger: Logger;
  now: () => number;
  /** The names waiting for some ranks, oldest first. */
  waiting(): Iterable<[string, WaitingName]>;
  /** Fails these names on every rank; the coordinator forgets them. */
  onTimeout(stalled: StalledName[]): void;
}

/** At most this many tensor names per rank in a warning. */
const kNamesPerRank = 8;

export class StallInspector {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private dueAt = Number.POSITIVE_INFINITY;
  /** Names already warned about (forgotten once they leave the coordinator's list). */
  private readonly warned = new Set<string>();

  constructor(private readonly options: StallInspectorOptions) {}

  /** Call after every change of the coordinator's waiting names. */
  update(): void {
    const due = this.nextDue();
    if (due === this.dueAt) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dueAt = due;
    if (due === Number.POSITIVE_INFINITY) return;
    this.timer = unrefTimer(setTimeout(() => this.check(), Math.max(0, Math.ceil(due - this.options.now()))));
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dueAt = Number.POSITIVE_INFINITY;
    this.warned.clear();
  }

  /** Whether a name with this deadline gets a warning first (not when it fails before). */
  private warns(timeoutMs: number): boolean {
    const { warningMs } = this.options;
    return warningMs > 0 && (timeoutMs <= 0 || warningMs < timeoutMs);
  }

  private nextDue(): number {
    const { warningMs, timeoutMs } = this.options;
    let due = Number.POSITIVE_INFINITY;
    const waitingNow = new Set<string>();
    for (const [name, entry] of this.options.waiting()) {
      waitingNow.add(name);
      const timeout = entry.timeoutMs ?? timeoutMs;
      if (timeout > 0) due = Math.min(due, entry.since + timeout);
      if (this.warns(timeout) && !this.warned.has(name)) due = Math.min(due, entry.since + warningMs);
    }
    for (const name of this.warned) if (!waitingNow.has(name)) this.warned.delete(name);
    return due;
  }

  private check(): void {
    this.timer = undefined;
    this.dueAt = Number.POSITIVE_INFINITY;
    const { warningMs, timeoutMs, logger } = this.options;
    const now = this.options.now();
    const toWarn: [string, WaitingName][] = [];
    const stalled: StalledName[] = [];
    for (const [name, entry] of this.options.waiting()) {
      const timeout = entry.timeoutMs ?? timeoutMs;
      if (timeout > 0 && now - entry.since >= timeout) {
        stalled.push({ name, message: timeoutMessage(name, entry, timeout), submitted: ranksWhere(entry, true) });
      } else if (this.warns(timeout) && !this.warned.has(name) && now - entry.since >= warningMs) {
        toWarn.push([name, entry]);
        this.warned.add(name);
      }
    }
    if (toWarn.length > 0) logger.warn(warningMessage(toWarn, warningMs, timeoutMs));
    for (const { message } of stalled) logger.error(message);
    if (stalled.length > 0) this.options.onTimeout(stalled);
    this.update();
  }
}

function ranksWhere(entry: WaitingName, submitted: boolean): number[] {
  const out: number[] = [];
  for (let rank = 0; rank < entry.requests.length; rank++) {
    if ((entry.requests[rank] !== undefined) === submitted) out.push(rank);
  }
  return out;
}

export function timeoutMessage(name: string, entry: WaitingName, timeoutMs: number): string {
  return (
    `Collective '${name}' timed out after ${timeoutMs} ms in negotiation: ` +
    `ranks ${ranksWhere(entry, false).join(', ')} did not submit it (ranks ${ranksWhere(entry, true).join(', ')} did).`
  );
}

/** One line: per missing rank, the names it has not submitted. */
export function warningMessage(names: readonly [string, WaitingName][], warningMs: number, timeoutMs: number): string {
  const byRank = new Map<number, string[]>();
  for (const [name, entry] of names) {
    for (const rank of ranksWhere(entry, false)) {
      const list = byRank.get(rank) ?? [];
      list.push(name);
      byRank.set(rank, list);
    }
  }
  const parts = [...byRank.entries()]
    .sort(([a], [b]) => a - b)
    .map(([rank, list]) => {
      const shown = list
        .slice(0, kNamesPerRank)
        .map((n) => `'${n}'`)
        .join(', ');
      const more = list.length > kNamesPerRank ? ` and ${list.length - kNamesPerRank} more` : '';
      return `rank ${rank} has not submitted ${shown}${more}`;
    });
  // A name's own deadline (option 'timeoutMs') replaces the stall timeout.
  const deadlines = new Set(names.map(([, entry]) => entry.timeoutMs ?? timeoutMs));
  const [only] = deadlines;
  const outcome =
    deadlines.size > 1
      ? 'they fail at their deadlines'
      : (only as number) > 0
        ? `they fail after ${only} ms`
        : 'RINGREDUCE_STALL_TIMEOUT_MS is 0, so they wait forever';
  return (
    `Stall: ${names.length === 1 ? '1 tensor has' : `${names.length} tensors have`} waited ${warningMs} ms for some ranks: ` +
    `${parts.join('; ')}. Those ranks are stuck or slow, or submit other tensors (or in another order); ${outcome}.`
  );
}
