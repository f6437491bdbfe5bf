/**
 * The scheduler under every segmented algorithm: a stream of sends and a stream of receives,
 * each issued in order (the transport matches messages first-in first-out per peer and tag)
 * with at most `depth` in flight, and each completing in order.
 *
 * How it works: a plan says how many sends and receives there are and whether the next send may
 * start given how many receives have completed (a segment is forwarded only after it arrived).
 * Receives are limited by the window alone: the slot they land in is free once the receive
 * `depth` places earlier has been finished. The scheduler keeps both windows full, so while one
 * segment is being reduced the next receives are already posted and the next sends are on the
 * wire; the sends and receives of a step always overlap. It is event driven: each completion
 * re-runs `pump`, which issues whatever has become possible.
 *
 * Deadlock freedom: every dependency, window limit included, points at an operation with a
 * smaller index in the common order of segments, and a send and its matching receive have the
 * same index on both ranks, so the smallest unfinished operation in the job can always proceed.
 *
 * On the first failure nothing more is issued, and the promise rejects only once every operation
 * in flight has settled, so that when it settles no receive can still write into the caller's
 * buffer or into scratch handed back to the pool. The transport's deadlines bound that wait.
 */
import { RingReduceError } from '../core/errors.js';

export interface PipelinePlan {
  readonly sends: number;
  readonly recvs: number;
  readonly depth: number;
  /** Whether the next send may start, given how many receives have completed. */
  canSend(recvsDone: number): boolean;
  /** Issues the next send. */
  startSend(): Promise<void>;
  /** Posts the next receive; `slot` in [0, depth) is free for it. */
  startRecv(slot: number): Promise<void>;
  /** Handles the next landed receive (for example reduces it); called in order. */
  finishRecv(slot: number): void;
}

export function runPipeline(plan: PipelinePlan): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    new PipelineRun(plan, resolve, reject).pump();
  });
}

class PipelineRun {
  private sendsIssued = 0;
  private sendsDone = 0;
  private recvsIssued = 0;
  private recvsDone = 0;
  private inFlight = 0;
  private failed = false;
  private error: unknown;
  private settled = false;
  // Completion flags by slot, so that out-of-order completions are consumed in order.
  private readonly sendLanded: Uint8Array;
  private readonly recvLanded: Uint8Array;

  constructor(
    private readonly plan: PipelinePlan,
    private readonly resolve: () => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.sendLanded = new Uint8Array(plan.depth);
    this.recvLanded = new Uint8Array(plan.depth);
  }

  pump(): void {
    if (this.settled) return;
    const { plan } = this;
    if (!this.failed) {
      try {
        while (this.sendsIssued < plan.sends && this.sendsIssued - this.sendsDone < plan.depth && plan.canSend(this.recvsDone)) {
          const slot = this.sendsIssued % plan.depth;
          this.sendsIssued++;
          this.track(plan.startSend(), () => this.onSend(slot));
        }
        while (this.recvsIssued < plan.recvs && this.recvsIssued - this.recvsDone < plan.depth) {
          const slot = this.recvsIssued % plan.depth;
          this.recvsIssued++;
          this.track(plan.startRecv(slot), () => this.onRecv(slot));
        }
      } catch (error) {
        this.fail(error);
      }
    }
    if (this.inFlight > 0) return;
    this.settled = true;
    if (this.failed) this.reject(this.error);
    else if (this.sendsDone === plan.sends && this.recvsDone === plan.recvs) this.resolve();
    else this.reject(new RingReduceError('pipeline plan stalled: no operation in flight and none may start'));
  }

  private track(operation: Promise<void>, onDone: () => void): void {
    this.inFlight++;
    operation.then(
      () => {
        this.inFlight--;
        onDone();
        this.pump();
      },
      (error: unknown) => {
        this.inFlight--;
        this.fail(error);
        this.pump();
      },
    );
  }

  private onSend(slot: number): void {
    this.sendLanded[slot] = 1;
    const { depth } = this.plan;
    while (this.sendLanded[this.sendsDone % depth] === 1) {
      this.sendLanded[this.sendsDone % depth] = 0;
      this.sendsDone++;
    }
  }

  private onRecv(slot: number): void {
    this.recvLanded[slot] = 1;
    const { depth } = this.plan;
    try {
      while (!this.failed && this.recvLanded[this.recvsDone % depth] === 1) {
        this.recvLanded[this.recvsDone % depth] = 0;
        this.plan.finishRecv(this.recvsDone % depth);
        this.recvsDone++;
      }
    } catch (error) {
      this.fail(error);
    }
  }

  private fail(error: unknown): void {
    if (this.failed) return;
    this.failed = true;
    this.error = error;
  }
}
