/**
 * `ringrun --timeline FILE`: the ranks of this launcher write their traces (timeline.ts) into a
 * temporary directory; when the job ends, failed or not, they are merged into FILE, one trace
 * for all of them (observability/timeline_merge.ts), and the directory is removed. Ranks that
 * run on other hosts (over ssh) cannot write into it: they write under /tmp on their host, and
 * ringrun says where. In the per-node mode each node's ringrun merges its own ranks: node 0's
 * into FILE, node i's into FILE with `.node<i>` before the extension.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { InvalidArgumentError } from '../core/errors.js';
import { timelinePathFor } from '../observability/timeline.js';
import { mergeTimelineFiles, rankTimelinePaths } from '../observability/timeline_merge.js';

/** What a program or script is named like, and a trace file is not. */
const kScriptExtension = /\.(?:[cm]?js|[cm]?ts|py|sh)$/;

/**
 * The flag's value: the trace file. A value that looks like a program (`node`, `python3`: no
 * extension, no directory) or a script (`train.js`) is most likely the command that the flag
 * swallowed (`ringrun -np 2 --timeline node train.js`): the error says how to write it.
 */
export function parseTimelineFile(value: string): string {
  const name = basename(value);
  if ((!value.includes('/') && !name.includes('.')) || kScriptExtension.test(name)) {
    throw new InvalidArgumentError(
      `--timeline takes the trace file to write (e.g. trace.json), got '${value}', which looks like the command: write --timeline trace.json before the command (a file without an extension: --timeline ./${value})`,
    );
  }
  return value;
}

export class TimelineFiles {
  /** The RINGREDUCE_TIMELINE of this launcher's ranks. */
  readonly rankPath: string;
  /** Where `file` is written (absolute: the ranks may run elsewhere). */
  readonly out: string;
  private readonly dir: string;

  /** `node`: this launcher's node in the per-node mode (node 0, or undefined: FILE itself). */
  constructor(file: string, cwd: string, node?: number) {
    this.out = resolve(cwd, node === undefined || node === 0 ? file : nodePath(file, node));
    this.dir = mkdtempSync(join(tmpdir(), 'ringrun-timeline-'));
    this.rankPath = join(this.dir, 'trace.json');
  }

  /** Removes the directory without merging (the job never started its ranks). */
  discard(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The RINGREDUCE_TIMELINE of a rank on another host. */
  static remotePath(jobId: string): string {
    return `/tmp/ringrun-timeline-${jobId}.json`;
  }

  /**
   * Merges the traces of `ranks` (of a job of `size`) into the output and removes the
   * directory; says what was written, which ranks left none, and where remote ones are.
   */
  finish(
    ranks: readonly number[],
    size: number,
    remote: { rank: number; host: string; jobId: string }[],
    log: (message: string) => void,
  ): void {
    try {
      const inputs = rankTimelinePaths(this.rankPath, ranks, size);
      const result = mergeTimelineFiles(inputs, this.out);
      const missing = ranks.filter((_, i) => result.missing.includes(inputs[i] as string));
      log(
        `timeline of ${ranks.length - missing.length} of ${ranks.length} ranks written to ${this.out} (${result.events} events; open it in https://ui.perfetto.dev)`,
      );
      if (missing.length > 0)
        log(`no timeline from rank${missing.length === 1 ? '' : 's'} ${missing.join(', ')} (it did not get as far as init())`);
      for (const line of result.unreadable) log(`timeline ${line}`);
      for (const { rank, host, jobId } of remote) {
        const path = size === 1 ? TimelineFiles.remotePath(jobId) : timelinePathFor(TimelineFiles.remotePath(jobId), rank);
        log(`rank ${rank} ran on ${host}: its timeline is ${path} there`);
      }
    } catch (error) {
      // A full disk or a bad path costs the trace, never the job's result.
      log(`cannot write the timeline ${this.out}: ${(error as Error).message}`);
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/** `trace.json` → `trace.node1.json` (as timelinePathFor names a rank's file). */
function nodePath(file: string, node: number): string {
  const dot = file.lastIndexOf('.');
  const slash = file.lastIndexOf('/');
  return dot > slash + 1 ? `${file.slice(0, dot)}.node${node}${file.slice(dot)}` : `${file}.node${node}`;
}
