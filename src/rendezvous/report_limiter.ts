/**
 * Rate limit of the reports of refused connections (the store server's and the mesh
 * acceptor's). A job only ever refuses a few strangers; a port scan or a flood makes hundreds,
 * and one warning each would drown the job's own output.
 *
 * How it works: the first `burst` refusals of a window of `windowMs` are reported in full. Past
 * that, refusals are only counted, and when the window ends one report stands for all of them:
 * the last one, with a note of how many there were and from how many addresses. While they keep
 * coming, every further window makes that one summary only; a window without refusals starts
 * over. The window's timer is unref'd (it never keeps a process alive), and close() reports what
 * is still counted.
 */

export interface ReportLimit {
  /** Refusals reported in full per window. */
  burst: number;
  windowMs: number;
}

export const kDefaultReportLimit: ReportLimit = { burst: 5, windowMs: 10_000 };

/** Emits one report; `note` is appended to its reason ('' for a refusal reported as is). */
export type Report = (note: string) => void;

/** At most this many distinct addresses are remembered per window (for the summary's count). */
const kMaxAddresses = 1000;

export class ReportLimiter {
  private reported = 0;
  private suppressed = 0;
  private last: Report | null = null;
  private readonly addresses = new Set<string>();
  /** A window ended with refusals suppressed: the next ones are summarised from their first. */
  private flooding = false;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  /** `limit` false: every refusal is reported (for tests that count them). */
  constructor(private readonly limit: ReportLimit | false = kDefaultReportLimit) {}

  /** A refusal from `remote` (host:port, or unix:path); `report` emits it. */
  offer(remote: string, report: Report): void {
    if (this.closed || this.limit === false) {
      if (!this.closed) report('');
      return;
    }
    this.timer ??= this.startWindow(this.limit.windowMs);
    if (!this.flooding && this.reported < this.limit.burst) {
      this.reported++;
      report('');
      return;
    }
    this.suppressed++;
    this.last = report;
    if (this.addresses.size < kMaxAddresses) this.addresses.add(hostOf(remote));
  }

  /** Reports what is counted, and stops the window. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private startWindow(ms: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timer = null;
      const quiet = this.suppressed === 0;
      this.flush();
      this.reported = 0;
      // Still coming: the next window summarises at once (one line per window); quiet: start over.
      this.flooding = !quiet;
      if (!quiet) this.timer = this.startWindow(ms);
    }, ms);
    // Node's timers can be unref'd; a browser's are numbers (the web mesh runs this in a page too).
    (timer as { unref?: () => void }).unref?.();
    return timer;
  }

  private flush(): void {
    if (this.suppressed === 0 || this.last === null || this.limit === false) return;
    const { windowMs } = this.limit;
    const window = windowMs >= 1000 ? `${Math.round(windowMs / 1000)} s` : `${windowMs} ms`;
    const addresses = this.addresses.size >= kMaxAddresses ? `${kMaxAddresses}+` : String(this.addresses.size);
    const more = this.suppressed - 1;
    this.last(
      more === 0
        ? ''
        : ` [and ${more} more refused in the last ${window}, from ${addresses} address${addresses === '1' ? '' : 'es'}: while they keep coming, one line per ${window}]`,
    );
    this.suppressed = 0;
    this.last = null;
    this.addresses.clear();
  }
}

/** The address without its port: one scanner uses many ports. */
function hostOf(remote: string): string {
  if (remote.startsWith('unix:')) return remote;
  const colon = remote.lastIndexOf(':');
  return colon > 0 ? remote.slice(0, colon) : remote;
}
