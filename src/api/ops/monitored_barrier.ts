/**
 * monitoredBarrier (torch.distributed's monitored_barrier): a barrier that, instead of waiting for
 * a missing rank until the stall timeout, names the ranks that did not arrive within the caller's
 * deadline, on every rank that did, and leaves the job usable. It is made of point-to-point
 * messages with deadlines (engine/execution/point_to_point.ts), under a tag of the library's own (2^31 and
 * up: no user message has one), a new one per call, so that a late message of one call never
 * meets the next:
 *
 * - every rank but 0 sends rank 0 one byte, its arrival, then waits for rank 0's answer;
 * - rank 0 takes the arrivals in rank order, each until its deadline (`timeoutMs` after it
 *   entered; then only those already there, as torch checks them);
 * - rank 0 answers every rank that arrived: its timeout and the ranks it names as missing (every
 *   one with `waitAll`, else the first, as torch's wait_all_ranks), none if all arrived; each of
 *   them resolves, or rejects with the same TimeoutError as rank 0.
 *
 * A rank that arrives too late finds its arrival withdrawn (the send's own deadline) and fails
 * with a TimeoutError saying so. Every wait has a deadline: an arrival's send `timeoutMs`, the
 * answer `timeoutMs` + kAnswerSlackMs once rank 0 has taken the arrival (rank 0 is then inside
 * the call, with at most `timeoutMs` left). The protocol is written once, as a generator of
 * message steps, run by an awaiting driver and by a blocking one (the Sync twin).
 */
import { InvalidArgumentError, TimeoutError } from '../../core/errors.js';
import { checkOptions } from '../tensor_args.js';
import { parseTimeout, type SystemPeerOptions } from './point_to_point.js';

/** The options of monitoredBarrier. */
export interface MonitoredBarrierOptions {
  /**
   * How long rank 0 waits for the other ranks, and each of them for rank 0 (the same on every
   * rank). Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** Name every rank that did not arrive in time, not only the first (torch's wait_all_ranks). Default false. */
  waitAll?: boolean;
}

/** The first tag of the library's own messages: above every user tag (< 2^31), within the wire's u32. */
const kFirstSystemTag = 2 ** 31;
/** What rank 0's answer may take beyond its deadline to reach a rank: the answer itself is one message. */
const kAnswerSlackMs = 2000;

/** The call, as every rank runs it: the same tag on every rank (calls are counted in order, as unnamed collectives). */
export interface MonitoredBarrierPlan {
  rank: number;
  size: number;
  tag: number;
  timeoutMs: number;
  waitAll: boolean;
}

/** Checks the options; `call` is this rank's count of monitored barriers so far. */
export function planMonitoredBarrier(
  options: unknown,
  place: { rank: number; size: number; stallTimeoutMs: number; call: number },
): MonitoredBarrierPlan {
  const o = checkOptions(options, ['timeoutMs', 'waitAll']);
  if (o.waitAll !== undefined && typeof o.waitAll !== 'boolean') {
    throw new InvalidArgumentError(`option 'waitAll' must be a boolean, got ${JSON.stringify(o.waitAll)}`);
  }
  const timeoutMs = parseTimeout(o.timeoutMs) ?? place.stallTimeoutMs;
  return {
    rank: place.rank,
    size: place.size,
    tag: kFirstSystemTag + (place.call % kFirstSystemTag),
    // A job without a stall timeout (0) still gets a deadline here: the barrier exists to have one.
    timeoutMs: timeoutMs > 0 ? timeoutMs : 60_000,
    waitAll: o.waitAll === true,
  };
}

/** The messages the protocol exchanges (a RingReduce's send and recv under the library's tags). */
export interface PeerMessages {
  send(data: Uint8Array | Uint32Array, options: SystemPeerOptions): Promise<void>;
  recv(into: Uint8Array | Uint32Array, options: SystemPeerOptions): Promise<unknown>;
  sendSync(data: Uint8Array | Uint32Array, options: SystemPeerOptions): void;
  recvSync(into: Uint8Array | Uint32Array, options: SystemPeerOptions): unknown;
}

type Step =
  | { kind: 'recv'; into: Uint8Array | Uint32Array; peer: number; timeoutMs: number }
  | { kind: 'send'; data: Uint32Array; peers: number[]; timeoutMs: number };

/** What a step came to: the errors of its messages (none: all went through). */
type Outcome = unknown[];

export async function monitoredBarrier(plan: MonitoredBarrierPlan, peers: PeerMessages): Promise<void> {
  const steps = protocol(plan);
  let next = steps.next([]);
  while (!next.done) {
    const step = next.value;
    const { tag } = plan;
    const settled =
      step.kind === 'recv'
        ? [await settle(peers.recv(step.into, { peer: step.peer, tag, timeoutMs: step.timeoutMs }))]
        : await Promise.all(step.peers.map((peer) => settle(peers.send(step.data, { peer, tag, timeoutMs: step.timeoutMs }))));
    next = steps.next(settled.filter((e) => e !== undefined));
  }
}

export function monitoredBarrierSync(plan: MonitoredBarrierPlan, peers: PeerMessages): void {
  const steps = protocol(plan);
  let next = steps.next([]);
  while (!next.done) {
    const step = next.value;
    const { tag } = plan;
    const errors: unknown[] = [];
    const attempt = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        errors.push(error);
      }
    };
    if (step.kind === 'recv') attempt(() => peers.recvSync(step.into, { peer: step.peer, tag, timeoutMs: step.timeoutMs }));
    else for (const peer of step.peers) attempt(() => peers.sendSync(step.data, { peer, tag, timeoutMs: step.timeoutMs }));
    next = steps.next(errors);
  }
}

function settle(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (error: unknown) => error ?? new Error('a message failed'),
  );
}

/** The protocol of one rank, step by step; each step is given back its outcome. */
function* protocol(plan: MonitoredBarrierPlan): Generator<Step, void, Outcome> {
  const { rank, size, timeoutMs, waitAll } = plan;
  if (size === 1) return;
  if (rank !== 0) {
    const [late] = yield { kind: 'send', data: Uint32Array.of(rank), peers: [0], timeoutMs };
    if (late !== undefined) {
      throw late instanceof TimeoutError
        ? new TimeoutError(
            `monitoredBarrier: rank 0 did not take rank ${rank}'s arrival within ${timeoutMs} ms (it had stopped waiting for this rank, or has not arrived)`,
          )
        : late;
    }
    const answer = new Uint32Array(size + 1);
    const [silent] = yield { kind: 'recv', into: answer, peer: 0, timeoutMs: timeoutMs + kAnswerSlackMs };
    if (silent !== undefined) {
      throw silent instanceof TimeoutError
        ? new TimeoutError(
            `monitoredBarrier: rank 0 took rank ${rank}'s arrival but did not answer within ${timeoutMs + kAnswerSlackMs} ms`,
          )
        : silent;
    }
    const missing = [...answer.subarray(1).keys()].filter((r) => answer[r + 1] === 1);
    if (missing.length > 0) throw missingError(missing, answer[0] as number);
    return;
  }
  const deadline = performance.now() + timeoutMs;
  const missing: number[] = [];
  for (let peer = 1; peer < size; peer++) {
    // Past the deadline, 1 ms: an arrival already here is taken at once (0 would mean no deadline).
    const left = Math.max(1, Math.ceil(deadline - performance.now()));
    const [error] = yield { kind: 'recv', into: Uint32Array.of(0), peer, timeoutMs: left };
    if (error === undefined) continue;
    if (!(error instanceof TimeoutError)) throw error;
    missing.push(peer);
  }
  const named = waitAll ? missing : missing.slice(0, 1);
  const answer = new Uint32Array(size + 1);
  answer[0] = timeoutMs;
  for (const r of named) answer[r + 1] = 1;
  const arrived = Array.from({ length: size - 1 }, (_, i) => i + 1).filter((r) => !missing.includes(r));
  if (arrived.length > 0) {
    const failed = yield { kind: 'send', data: answer, peers: arrived, timeoutMs };
    if (failed.length > 0) throw failed[0];
  }
  if (named.length > 0) throw missingError(named, timeoutMs);
}

/** The same message on every rank: rank 0's timeout and the ranks it names. */
function missingError(ranks: readonly number[], timeoutMs: number): TimeoutError {
  const which = ranks.length === 1 ? `rank ${ranks[0]}` : `ranks ${ranks.join(', ')}`;
  return new TimeoutError(`monitoredBarrier: ${which} did not arrive within ${timeoutMs} ms`);
}
