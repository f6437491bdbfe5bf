/**
 * Timeline: a Chrome trace (Perfetto and chrome://tracing open it) of what one rank's engine
 * did, written when RINGREDUCE_TIMELINE (or init's `timeline` option) names a file.
 *
 * Each collective is a row (a "thread" named after the tensor) with complete events ("X") for
 * its phases: QUEUE (submitted, waiting to be reported), NEGOTIATE (reported to rank 0, waiting
 * for the agreed response), WAIT (agreed, waiting for the collectives ahead of it), FUSION_COPY
 * (into and out of the fusion buffer), COMMUNICATE (the algorithm) and REDUCE (each reduce
 * kernel call inside it). Fused collectives share one COMMUNICATE on the row of the first name.
 *
 * Events are buffered and appended to the file in batches, so the cost when enabled is a push
 * per event; when disabled the engine holds no Timeline at all. The file is a JSON array that
 * close() terminates; rank r of a job of more than one rank writes to `timelinePathFor(path, r)`.
 *
 * A trace is not worth a job: a write that fails (the disk full, the file gone) is reported once
 * through `warn` and the timeline stops, leaving the file cut short.
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import type { Config } from '../core/config.js';

export type Phase = 'QUEUE' | 'NEGOTIATE' | 'WAIT' | 'FUSION_COPY' | 'COMMUNICATE' | 'REDUCE';

interface TraceEvent {
  name: string;
  ph: 'X' | 'M';
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

const kFlushEvents = 4096;

/** `trace.json` → `trace.rank1.json`; a path containing `{rank}` gets the rank substituted. */
export function timelinePathFor(path: string, rank: number): string {
  if (path.includes('{rank}')) return path.replaceAll('{rank}', String(rank));
  const dot = path.lastIndexOf('.');
  const slash = path.lastIndexOf('/');
  return dot > slash + 1 ? `${path.slice(0, dot)}.rank${rank}${path.slice(dot)}` : `${path}.rank${rank}`;
}

/** The timeline `config` asks for (RINGREDUCE_TIMELINE, init's `timeline`), opened; undefined when none. */
export function openTimeline(
  config: Pick<Config, 'timeline' | 'rank' | 'size'>,
  warn: (message: string) => void = () => {},
): Timeline | undefined {
  if (!config.timeline) return undefined;
  return new Timeline(config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline, config.rank, warn);
}

export class Timeline {
  private readonly tids = new Map<string, number>();
  private buffered: string[] = [];
  private first = true;
  private closed = false;

  constructor(
    private readonly path: string,
    private readonly rank: number,
    private readonly warn: (message: string) => void = () => {},
  ) {
    this.write(() => writeFileSync(path, '[\n'));
    this.push({ name: 'process_name', ph: 'M', pid: rank, tid: 0, args: { name: `rank ${rank}` } });
  }

  /** Microseconds on the clock the events use. */
  now(): number {
    return performance.timeOrigin * 1000 + performance.now() * 1000;
  }

  /** Records a phase of `tensor` from `startUs` until now. */
  phase(tensor: string, phase: Phase, startUs: number, args?: Record<string, unknown>): void {
    const end = this.now();
    this.span(tensor, phase, startUs, end - startUs, args);
  }

  span(tensor: string, phase: Phase, startUs: number, durUs: number, args?: Record<string, unknown>): void {
    if (this.closed) return;
    const event: TraceEvent = {
      name: phase,
      ph: 'X',
      pid: this.rank,
      tid: this.tid(tensor),
      ts: startUs,
      dur: durUs,
      cat: 'ringreduce',
    };
    if (args) event.args = args;
    this.push(event);
  }

  close(): void {
    if (this.closed) return;
    this.flush();
    this.write(() => appendFileSync(this.path, '\n]\n'));
    this.closed = true;
  }

  private tid(tensor: string): number {
    let tid = this.tids.get(tensor);
    if (tid === undefined) {
      tid = this.tids.size + 1;
      this.tids.set(tensor, tid);
      this.push({ name: 'thread_name', ph: 'M', pid: this.rank, tid, args: { name: tensor } });
    }
    return tid;
  }

  private push(event: TraceEvent): void {
    if (this.closed) return;
    this.buffered.push((this.first ? '' : ',\n') + JSON.stringify(event));
    this.first = false;
    if (this.buffered.length >= kFlushEvents) this.flush();
  }

  private flush(): void {
    if (this.buffered.length === 0 || this.closed) return;
    const text = this.buffered.join('');
    this.buffered = [];
    this.write(() => appendFileSync(this.path, text));
  }

  /** Runs one write; the first that fails stops the timeline, with one warning. */
  private write(run: () => void): void {
    if (this.closed) return;
    try {
      run();
    } catch (error) {
      this.closed = true;
      this.buffered = [];
      this.warn(`cannot write the timeline ${this.path}: ${(error as Error).message}; it stops here, the job goes on`);
    }
  }
}
