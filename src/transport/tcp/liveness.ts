/**
 * Liveness of a rank's links: heartbeats out, silence detection in.
 *
 * How it works: one timer per transport ticks every `intervalMs` (unref'd: it never keeps a
 * process alive). On each tick, per peer:
 * - Heard: if the peer's receiver has read anything since the last tick, the peer was heard
 *   from now. (Counting reads costs an increment per read; no clock is read on the data path.)
 * - Heartbeat out: a link frame of 12 bytes, sent only on a link that carried nothing since
 *   the last tick, and only to the ring successor (rank + 1), or to every peer while this rank
 *   has operations pending. An idle job thus wakes once per interval for its timer and once for
 *   its predecessor's heartbeat; a busy link never carries one.
 * - Silence: the ring predecessor (rank - 1) must be heard within `silenceMs`; when it is not
 *   (stopped by SIGSTOP, hung, its host gone or the network cut), `onSilent` fails it. The
 *   ring covers every rank: each one is watched by its successor.
 *
 * The "heard" times also serve the transport's op watchdog: a recv that makes no progress
 * from a peer that is still heard (it is alive, and waiting for someone else) is given more
 * time, so the rank that is actually stuck is the one named (see tcp_transport.ts).
 *
 * If this process itself was stopped, the tick comes late: silence measured across that gap
 * says nothing about the peers, so after a late tick every peer counts as heard now.
 */
import { performance } from 'node:perf_hooks';

export interface LivenessLink {
  /** Reads so far on the peer's receive connection. */
  reads(): number;
  /** Frames written so far on the peer's send connection. */
  frames(): number;
  /** Bytes queued on the send connection that the kernel has not taken. */
  backlog(): number;
  sendHeartbeat(): void;
  /** False once the link failed or the peer left. */
  usable(): boolean;
}

export interface LivenessOptions {
  rank: number;
  size: number;
  intervalMs: number;
  silenceMs: number;
  /** The link to each peer, by rank; undefined for this rank. */
  links: readonly (LivenessLink | undefined)[];
  /** Whether this rank has transport operations pending (it then beats to every peer). */
  busy(): boolean;
  onSilent(peer: number, silentMs: number): void;
}

interface Seen {
  reads: number;
  frames: number;
  heardAt: number;
}

export class Liveness {
  private readonly seen: Seen[];
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private lastTick = performance.now();

  constructor(private readonly options: LivenessOptions) {
    const now = performance.now();
    this.seen = Array.from({ length: options.size }, (_, peer) => ({
      reads: options.links[peer]?.reads() ?? 0,
      frames: options.links[peer]?.frames() ?? 0,
      heardAt: now,
    }));
    this.arm();
  }

  /** Whether `peer` was heard from at or after `since` (performance.now() clock). */
  heardSince(peer: number, since: number): boolean {
    return (this.seen[peer]?.heardAt ?? Number.NEGATIVE_INFINITY) >= since;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  private tick(): void {
    const { rank, size, intervalMs, silenceMs } = this.options;
    const now = performance.now();
    const late = now - this.lastTick > 2 * intervalMs + 100;
    this.lastTick = now;
    const busy = this.options.busy();
    const successor = (rank + 1) % size;
    const predecessor = (rank - 1 + size) % size;
    for (let peer = 0; peer < size; peer++) {
      const link = this.options.links[peer];
      const seen = this.seen[peer];
      if (link === undefined || seen === undefined || !link.usable()) continue;
      const reads = link.reads();
      if (reads !== seen.reads || late) seen.heardAt = now;
      seen.reads = reads;
      const frames = link.frames();
      if ((peer === successor || busy) && frames === seen.frames && link.backlog() === 0) link.sendHeartbeat();
      seen.frames = link.frames();
    }
    this.timer = null;
    const pred = this.seen[predecessor];
    const predLink = this.options.links[predecessor];
    if (pred !== undefined && predLink?.usable() && now - pred.heardAt >= silenceMs) {
      this.options.onSilent(predecessor, Math.round(now - pred.heardAt));
    }
    this.arm();
  }
}
