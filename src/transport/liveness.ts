/**
 * Liveness of a rank's links while the rank is active: pings out, silence detection in. Shared
 * by the backends with links of their own (tcp/, web/); no Node import, so it runs in a browser.
 *
 * How it works. The transport activates liveness when it has something to wait for (the engine
 * said so with setActive, or a send/recv/control op started). While active, one timer ticks
 * every `intervalMs` (unref'd: it never keeps a process alive). On activation and on each tick,
 * per peer:
 * - Heard: the peer's receiver stamps the time of its last read (`lastHeard`): any bytes count.
 * - Ping: a peer not heard within the last interval gets a ping, a 12-byte link frame that its
 *   transport answers at once with a heartbeat, whether or not it is active itself. No ping goes
 *   on a link whose send queue the kernel has not taken: it would wait behind that data, whose
 *   progress the op watchdog already judges.
 * - Silence: a peer that has not answered a ping for two intervals and has not been heard for
 *   the silence limit (stopped by SIGSTOP, hung, its host gone or the network cut) is failed
 *   through `onSilent`. Two intervals give a peer that was idle (unheard for long, legitimately)
 *   time to answer the ping sent when this rank became active. The limit is kSilentIntervals
 *   intervals, or `silenceMs` (the I/O timeout) when that is shorter: 8 s at the default 2 s
 *   interval. Pings are answered by the peer's transport, in its engine thread, whatever its
 *   caller's thread is doing (a long synchronous computation delays nothing), so a peer that
 *   misses four in a row is not busy: it is gone. A tick due when the next peer would reach
 *   the limit keeps the verdict from waiting for the next interval.
 *
 * Idle: at a tick where the transport no longer wants watching and every ping has been answered,
 * the timer is not re-armed. An idle transport schedules nothing and sends nothing; its peers
 * are idle too unless they ask. A peer that froze while the job was idle is found about two
 * intervals after the next operation starts; a dead host is found while idle by TCP keepalive
 * in the kernel (tcp/tcp_transport.ts).
 *
 * The heard times also serve the op watchdog: a recv that makes no progress from a peer that is
 * still heard from (it is alive, and waiting for someone else) is given more time, so the rank
 * that is actually stuck is the one named (see tcp/tcp_transport.ts).
 *
 * If this process itself was stopped, the tick comes late and the peers' answers may sit unread
 * in the sockets: silence measured across that gap says nothing about them, so after a late tick
 * every peer counts as heard now.
 */

export interface LivenessLink {
  /** performance.now() of the last read on the peer's receive connection. */
  lastHeard(): number;
  /** Bytes queued on the send connection that the kernel has not taken. */
  backlog(): number;
  /** Sends a ping, which the peer answers with a heartbeat. */
  ping(): void;
  /** False once the link failed or the peer left. */
  usable(): boolean;
}

export interface LivenessOptions {
  size: number;
  intervalMs: number;
  silenceMs: number;
  /** The link to each peer, by rank; undefined for this rank. */
  links: readonly (LivenessLink | undefined)[];
  /** Whether the transport still wants its peers watched (engine active, or ops pending). */
  wanted(): boolean;
  onSilent(peer: number, silentMs: number): void;
}

interface Watch {
  /** When the oldest unanswered ping went out; null when none is outstanding. */
  askedAt: number | null;
  /** A late tick counts every peer as heard at that time. */
  excusedAt: number;
}

/** A peer has this many intervals to answer a ping before its silence may fail it. */
const kAnswerIntervals = 2;
/** A peer unheard this many intervals (its pings unanswered) is silent (see above). */
export const kSilentIntervals = 4;

/** How long a peer may be unheard before it counts as silent: the op watchdog uses the same limit. */
export function silenceLimitMs(intervalMs: number, silenceMs: number): number {
  return intervalMs > 0 ? Math.min(silenceMs, kSilentIntervals * intervalMs) : silenceMs;
}

export class Liveness {
  private readonly watches: Watch[];
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** When the armed timer is due (performance.now() clock). */
  private dueAt = 0;
  private readonly limitMs: number;

  constructor(private readonly options: LivenessOptions) {
    const now = performance.now();
    this.watches = Array.from({ length: options.size }, () => ({ askedAt: null, excusedAt: now }));
    this.limitMs = silenceLimitMs(options.intervalMs, options.silenceMs);
  }

  /** Whether the timer is armed (for tests: an idle transport has none). */
  get running(): boolean {
    return this.timer !== null;
  }

  /** Starts watching, if not already: pings the peers not heard lately and arms the timer. */
  activate(): void {
    if (this.timer !== null || this.stopped) return;
    const now = performance.now();
    this.probe(now);
    this.arm(this.options.intervalMs);
  }

  /** Whether `peer` was heard from at or after `since` (performance.now() clock). */
  heardSince(peer: number, since: number): boolean {
    return this.heardAt(peer) >= since;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private heardAt(peer: number): number {
    const heard = this.options.links[peer]?.lastHeard() ?? Number.NEGATIVE_INFINITY;
    return Math.max(heard, this.watches[peer]?.excusedAt ?? Number.NEGATIVE_INFINITY);
  }

  private arm(ms: number): void {
    const delay = Math.max(1, Math.ceil(ms));
    this.dueAt = performance.now() + delay;
    this.timer = setTimeout(() => this.tick(), delay);
    // Node's timers can be unref'd; a browser's are plain numbers (and keep nothing alive).
    (this.timer as { unref?: () => void }).unref?.();
  }

  private tick(): void {
    this.timer = null;
    const { intervalMs, links } = this.options;
    const now = performance.now();
    if (now - this.dueAt > intervalMs + 100) {
      for (const watch of this.watches) {
        watch.excusedAt = now;
        watch.askedAt = null;
      }
    }
    const asking = this.probe(now);
    // The soonest moment a peer still asked could be found silent: tick then, not an interval later.
    let next = intervalMs;
    for (let peer = 0; peer < this.watches.length && !this.stopped; peer++) {
      const askedAt = (this.watches[peer] as Watch).askedAt;
      if (askedAt === null || !links[peer]?.usable()) continue;
      const heard = this.heardAt(peer);
      const silentMs = now - heard;
      // 1 ms of slack: the timer's clock and performance.now() round differently.
      if (now - askedAt >= kAnswerIntervals * intervalMs - 1 && silentMs >= this.limitMs - 1) {
        this.options.onSilent(peer, Math.round(silentMs));
        continue;
      }
      next = Math.min(next, Math.max(askedAt + kAnswerIntervals * intervalMs, heard + this.limitMs) - now);
    }
    if (!this.stopped && (asking || this.options.wanted())) this.arm(next);
  }

  /** Pings every peer not heard within an interval; returns whether a ping is unanswered. */
  private probe(now: number): boolean {
    let asking = false;
    for (let peer = 0; peer < this.watches.length; peer++) {
      const link = this.options.links[peer];
      const watch = this.watches[peer] as Watch;
      if (link === undefined || !link.usable()) {
        watch.askedAt = null;
        continue;
      }
      const heard = this.heardAt(peer);
      if (watch.askedAt !== null && heard >= watch.askedAt) watch.askedAt = null;
      if (now - heard >= this.options.intervalMs) {
        if (link.backlog() > 0) watch.askedAt = null;
        else {
          link.ping();
          watch.askedAt ??= now;
        }
      }
      if (watch.askedAt !== null) asking = true;
    }
    return asking;
  }
}
