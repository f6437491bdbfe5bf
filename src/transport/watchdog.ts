/**
 * The I/O deadline of a transport's pending operations (tcp/ and web/; no Node import).
 *
 * How it works: one timer per transport, armed only while operations are pending, scans their
 * progress stamps (set by the receiver per read and by the sender per completed write) and
 * re-arms for the next due time. An op with no progress for ioTimeoutMs has expired, except a
 * recv whose peer is still heard from (heartbeats, liveness.ts): that peer is alive and most
 * likely waiting for another rank, which its own deadline or its successor will name, so the
 * recv gets up to kMaxWaitFactor × ioTimeoutMs. An idle transport has no timer at all.
 *
 * With heartbeats, an op also expires early, at the silence limit of liveness.ts (8 s at the
 * defaults), when its peer has not been heard from for that long either: such a peer is
 * silent, and liveness cannot always say so itself (it sends no ping on a link whose send
 * queue is full, so a peer that stopped reading while this rank sends it a large message is
 * found here).
 */
import { silenceLimitMs } from './liveness.js';
import type { PendingOp } from './pending_op.js';

/** An op whose peer is still heard from may wait this many I/O timeouts without progress. */
const kMaxWaitFactor = 3;

export interface WatchdogOptions {
  ioTimeoutMs: number;
  pending: ReadonlySet<PendingOp>;
  /** Whether `peer` was heard from since `since`; null without heartbeats. */
  heardSince: ((peer: number, since: number) => boolean) | null;
  /** How soon to look again at an op given more time (the heartbeat interval). */
  recheckMs: number;
  /**
   * `op` made no progress for `idleMs`: past the I/O timeout, or (`silenceMs` set) past the
   * silence limit, which is `silenceMs`, with its peer unheard for as long.
   */
  onExpired(op: PendingOp, idleMs: number, silenceMs?: number): void;
}

export class Watchdog {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** No progress this long, from a peer unheard this long, expires an op (see above). */
  private readonly silenceMs: number;

  constructor(private readonly options: WatchdogOptions) {
    this.silenceMs = options.heardSince === null ? options.ioTimeoutMs : silenceLimitMs(options.recheckMs, options.ioTimeoutMs);
  }

  /** Call after posting an op: arms the timer if it is not already running. */
  ensure(): void {
    if (this.timer === null && !this.stopped && this.options.pending.size > 0) this.arm(this.silenceMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.check(), Math.max(1, Math.ceil(ms)));
    // An idle engine keeps a recv posted: its deadline must not hold the process (the sockets
    // of pending calls do). Node's timers can be unref'd; a browser's are plain numbers.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private check(): void {
    this.timer = null;
    const { ioTimeoutMs, pending } = this.options;
    const now = performance.now();
    const expired: PendingOp[] = [];
    for (const op of pending) {
      const idle = now - op.lastProgress;
      if (idle >= ioTimeoutMs ? !this.givenMoreTime(op, idle, now) : this.silent(op, idle, now)) expired.push(op);
    }
    // Settled by the failure of an op expired before it: skip.
    for (const op of expired) {
      if (op.done) continue;
      const idle = now - op.lastProgress;
      if (idle < ioTimeoutMs) this.options.onExpired(op, idle, this.silenceMs);
      else this.options.onExpired(op, idle);
    }
    let next = Number.POSITIVE_INFINITY;
    for (const op of pending) {
      const due = op.lastProgress + this.silenceMs;
      next = Math.min(next, due > now ? due : now + this.options.recheckMs);
    }
    if (next !== Number.POSITIVE_INFINITY && !this.stopped) this.arm(next - now);
  }

  /** No progress for the silence limit, from a peer not heard from for as long. */
  private silent(op: PendingOp, idle: number, now: number): boolean {
    const { heardSince } = this.options;
    return heardSince !== null && idle >= this.silenceMs && !heardSince(op.peer, now - this.silenceMs);
  }

  private givenMoreTime(op: PendingOp, idle: number, now: number): boolean {
    const { heardSince, ioTimeoutMs } = this.options;
    return (
      heardSince !== null && op.kind === 'recv' && idle < kMaxWaitFactor * ioTimeoutMs && heardSince(op.peer, now - ioTimeoutMs)
    );
  }
}
