/**
 * rr.stats(): one rank's counters since init, kept where both threads see them.
 *
 * How it works: the counters are one Float64Array over a SharedArrayBuffer that the caller's
 * thread creates (api/engine_client.ts) and hands to the engine worker with its init data. The
 * engine is the only writer (StatsWriter: a few adds where a call is submitted, agreed, executed
 * and settled, no allocation); the caller's thread reads a snapshot synchronously (readStats),
 * with no message round trip. A sequence number in front of the counters (an Int32 word, bumped
 * before and after every update, as a seqlock) lets the reader retry a snapshot that an update
 * cut through, so the counters it returns agree with each other.
 *
 * Layout, in 8-byte slots after the 8-byte header: the job-wide counters of kGlobalSlots, then
 * per operation (kStatOps: the collectives in registry order, then send and recv) its completed,
 * failed and bytes counters. A settled call is counted before its completion is posted, so a
 * caller that has awaited a collective finds it counted.
 */
import { kCollectiveOps } from '../../core/collective_ops.js';

/** The operations counted one by one: every collective, then send and recv. */
export const kStatOps = [...kCollectiveOps, 'send', 'recv'] as const;
/** An operation {@link RankStats} counts on its own (`byOp`): each collective's name, 'send' or 'recv'. */
export type StatOp = (typeof kStatOps)[number];

const kGlobalSlots = [
  'pending',
  'submitted',
  'completed',
  'failed',
  'bytes',
  'executions',
  'executed',
  'eager',
  'cacheHits',
  'cacheMisses',
  'negotiationMs',
  'executionMs',
  'sentBytes',
  'receivedBytes',
  'controlSentBytes',
  'controlReceivedBytes',
  'crossHostSentBytes',
  'crossHostReceivedBytes',
  'controlSentMessages',
  'controlReceivedMessages',
  'autotune',
  'autotuneDone',
  'autotuneTrials',
  'autotuneFusionThresholdBytes',
  'autotuneBurstHoldMs',
  'autotuneScore',
] as const;
type GlobalSlot = (typeof kGlobalSlots)[number];

const kSlot = Object.fromEntries(kGlobalSlots.map((name, i) => [name, i])) as Record<GlobalSlot, number>;
const kPerOp = 3;
const kOpBase = kGlobalSlots.length;
const kSlots = kOpBase + kPerOp * kStatOps.length;
/** The Int32 words before the counters: [0] the sequence number, [1] unused (keeps the Float64s aligned). */
const kHeaderBytes = 8;
const kOpCodes = new Map<string, number>(kStatOps.map((op, i) => [op, i]));

/** Bytes of the shared buffer the counters live in. */
export const kStatsBytes = kHeaderBytes + kSlots * 8;

/** A fresh, zeroed buffer for one rank's counters. */
export function createStatsBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(kStatsBytes);
}

/** The counters of one operation. */
export interface OpStats {
  /** Calls that completed. */
  completed: number;
  /** Calls that settled with an error. */
  failed: number;
  /** Bytes of this rank's tensors in the completed calls (its input; a recv's message). */
  bytes: number;
}

/** Where autotune stands on this rank (engine/tuning/; docs/performance.md, "Autotune"). */
export interface AutotuneStats {
  /** The search has ended: `settings` are its choice, kept for the rest of the job. */
  done: boolean;
  /** Trials begun so far (all of them once done). */
  trials: number;
  /** The settings in force on this rank (the world's; every rank switches at the same place). */
  settings: { fusionThresholdBytes: number; burstHoldMs: number };
  /** Once done: the choice's score, bytes completed per second as rank 0 measured it; 0 before. */
  score: number;
}

/** One rank's counters since init (rr.stats()). Times in milliseconds, sizes in bytes. */
export interface RankStats {
  /** Collectives (and sends and recvs) submitted and not settled yet. */
  pending: number;
  /** Calls submitted since init. */
  submitted: number;
  /** Calls that completed. */
  completed: number;
  /** Calls that settled with an error. */
  failed: number;
  /** Bytes of this rank's tensors in the completed calls. */
  bytes: number;
  /** Per operation; every operation is listed, with zeros when unused. */
  byOp: Record<StatOp, OpStats>;
  /**
   * Runs of an algorithm: a fused run of many tensors is one. Calls that finish without one (tiny
   * cached allreduces whose data rode with the ready round, sends, recvs) are not in it.
   */
  executions: number;
  /** The collectives those runs completed. */
  executed: number;
  /** Collectives per run: executed / executions (1 without runs); above 1 when fusion merged tensors. */
  fusionRatio: number;
  /** Tiny cached collectives finished in their ready round (eager_exchange.ts). */
  eager: number;
  /** Requests that travelled as response cache ids (agreed without rank 0). */
  cacheHits: number;
  /** Requests that went to rank 0 in full (new names, changed parameters, unnamed calls). */
  cacheMisses: number;
  /** Time from submission until agreement, per run (from its earliest tensor) and per eager collective, summed. */
  negotiationMs: number;
  /** Time the algorithms ran, summed over runs. */
  executionMs: number;
  /** Data-plane bytes sent to and received from peers (collectives' algorithms, sends and recvs). */
  sentBytes: number;
  receivedBytes: number;
  /** Control-plane bytes (negotiation, ready rounds with their eager data, point-to-point offers). */
  controlSentBytes: number;
  controlReceivedBytes: number;
  /**
   * The part of sentBytes and receivedBytes exchanged with ranks on other hosts (as the launcher
   * placed them: cross rank); 0 in a job on one host, or where the placements do not say (engine/topology.ts).
   */
  crossHostSentBytes: number;
  crossHostReceivedBytes: number;
  /** Control-plane messages sent and received (ready rounds: see docs/performance.md for their count per step). */
  controlSentMessages: number;
  controlReceivedMessages: number;
  /** With autotune on (RINGREDUCE_AUTOTUNE): its state; otherwise undefined. */
  autotune: AutotuneStats | undefined;
}

/** The engine's side: the only writer of a rank's counters. */
export class StatsWriter {
  private readonly seq: Int32Array;
  private readonly f: Float64Array;

  constructor(readonly buffer: SharedArrayBuffer = createStatsBuffer()) {
    this.seq = new Int32Array(buffer, 0, 2);
    this.f = new Float64Array(buffer, kHeaderBytes, kSlots);
  }

  /** The code of `op` for submitted() and settled(). */
  static codeOf(op: string): number {
    return kOpCodes.get(op) ?? -1;
  }

  /** A call was submitted; `pending` calls are now unsettled. */
  submitted(pending: number): void {
    this.begin();
    this.f[kSlot.submitted]++;
    this.f[kSlot.pending] = pending;
    this.end();
  }

  /** A call of operation `code` (codeOf) settled; `pending` calls are still unsettled. */
  settled(code: number, bytes: number, ok: boolean, pending: number): void {
    if (ok) this.completed(code, 1, bytes, pending);
    else {
      const f = this.f;
      this.begin();
      f[kSlot.pending] = pending;
      f[kSlot.failed]++;
      if (code >= 0) f[kOpBase + kPerOp * code + 1]++;
      this.end();
    }
  }

  /** `calls` calls of operation `code` (codeOf), `bytes` in all, completed (a run's); `pending` calls are still unsettled. */
  completed(code: number, calls: number, bytes: number, pending: number): void {
    const f = this.f;
    this.begin();
    f[kSlot.pending] = pending;
    f[kSlot.completed] += calls;
    f[kSlot.bytes] += bytes;
    if (code >= 0) {
      const base = kOpBase + kPerOp * code;
      f[base] += calls;
      f[base + 2] += bytes;
    }
    this.end();
  }

  /** A flush reported `hits` requests by cache id and `misses` in full. */
  requests(hits: number, misses: number): void {
    this.begin();
    this.f[kSlot.cacheHits] += hits;
    this.f[kSlot.cacheMisses] += misses;
    this.end();
  }

  /** A run or an eager collective was agreed `ms` after its earliest submission. */
  negotiated(ms: number, eager: boolean): void {
    this.begin();
    this.f[kSlot.negotiationMs] += ms;
    if (eager) this.f[kSlot.eager]++;
    this.end();
  }

  /** An algorithm ran `collectives` collectives in `ms`. */
  executed(collectives: number, ms: number): void {
    this.begin();
    this.f[kSlot.executions]++;
    this.f[kSlot.executed] += collectives;
    this.f[kSlot.executionMs] += ms;
    this.end();
  }

  /** Autotune's settings in force on this rank and where its search stands. */
  autotune(state: { fusionThresholdBytes: number; burstHoldMs: number; trial: number; done: boolean; score: number }): void {
    const f = this.f;
    this.begin();
    f[kSlot.autotune] = 1;
    f[kSlot.autotuneDone] = state.done ? 1 : 0;
    f[kSlot.autotuneTrials] = state.trial;
    f[kSlot.autotuneFusionThresholdBytes] = state.fusionThresholdBytes;
    f[kSlot.autotuneBurstHoldMs] = state.burstHoldMs;
    f[kSlot.autotuneScore] = state.score;
    this.end();
  }

  /** Traffic: no sequence bump (an add or two each, read without the others). */
  sent(bytes: number): void {
    this.f[kSlot.sentBytes] += bytes;
  }
  received(bytes: number): void {
    this.f[kSlot.receivedBytes] += bytes;
  }
  crossHostSent(bytes: number): void {
    this.f[kSlot.crossHostSentBytes] += bytes;
  }
  crossHostReceived(bytes: number): void {
    this.f[kSlot.crossHostReceivedBytes] += bytes;
  }
  controlSent(bytes: number): void {
    this.f[kSlot.controlSentBytes] += bytes;
    this.f[kSlot.controlSentMessages]++;
  }
  controlReceived(bytes: number): void {
    this.f[kSlot.controlReceivedBytes] += bytes;
    this.f[kSlot.controlReceivedMessages]++;
  }

  private begin(): void {
    Atomics.add(this.seq, 0, 1);
  }
  private end(): void {
    Atomics.add(this.seq, 0, 1);
  }
}

const kReadAttempts = 100;

/** A consistent snapshot of the counters in `buffer` (from any thread). */
export function readStats(buffer: SharedArrayBuffer): RankStats {
  const seq = new Int32Array(buffer, 0, 2);
  const f = new Float64Array(buffer, kHeaderBytes, kSlots);
  const copy = new Float64Array(kSlots);
  for (let attempt = 0; attempt < kReadAttempts; attempt++) {
    const before = Atomics.load(seq, 0);
    if (before % 2 === 1) continue;
    copy.set(f);
    if (Atomics.load(seq, 0) === before) break;
  }
  const g = (name: GlobalSlot) => copy[kSlot[name]] as number;
  const byOp = {} as Record<StatOp, OpStats>;
  kStatOps.forEach((op, i) => {
    const base = kOpBase + kPerOp * i;
    byOp[op] = { completed: copy[base] as number, failed: copy[base + 1] as number, bytes: copy[base + 2] as number };
  });
  const executions = g('executions');
  return {
    pending: g('pending'),
    submitted: g('submitted'),
    completed: g('completed'),
    failed: g('failed'),
    bytes: g('bytes'),
    byOp,
    executions,
    executed: g('executed'),
    fusionRatio: executions > 0 ? g('executed') / executions : 1,
    eager: g('eager'),
    cacheHits: g('cacheHits'),
    cacheMisses: g('cacheMisses'),
    negotiationMs: g('negotiationMs'),
    executionMs: g('executionMs'),
    sentBytes: g('sentBytes'),
    receivedBytes: g('receivedBytes'),
    controlSentBytes: g('controlSentBytes'),
    controlReceivedBytes: g('controlReceivedBytes'),
    crossHostSentBytes: g('crossHostSentBytes'),
    crossHostReceivedBytes: g('crossHostReceivedBytes'),
    controlSentMessages: g('controlSentMessages'),
    controlReceivedMessages: g('controlReceivedMessages'),
    autotune:
      g('autotune') === 1
        ? {
            done: g('autotuneDone') === 1,
            trials: g('autotuneTrials'),
            settings: { fusionThresholdBytes: g('autotuneFusionThresholdBytes'), burstHoldMs: g('autotuneBurstHoldMs') },
            score: g('autotuneScore'),
          }
        : undefined,
  };
}
