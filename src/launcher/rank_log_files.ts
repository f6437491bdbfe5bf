import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';

/** The file --output-dir writes rank `rank`'s output to. */
export function rankLogPath(dir: string, rank: number): string {
  return join(dir, `rank.${rank}.log`);
}

/**
 * One file per rank under --output-dir, holding the rank's stdout and stderr lines in the
 * order they arrived, without prefix. The launcher still prints them too.
 */
export class RankLogFiles {
  private readonly streams = new Map<number, WriteStream>();

  /**
   * Creates the directory (and parents); throws if that is impossible, before any rank starts.
   * `ranks`: the ranks whose output this launcher sees (a count: 0 … count-1).
   */
  constructor(dir: string, ranks: number | readonly number[], onError: (message: string) => void) {
    mkdirSync(dir, { recursive: true });
    const list = typeof ranks === 'number' ? Array.from({ length: ranks }, (_, rank) => rank) : ranks;
    // A full disk fails every file at once: one warning says it for all of them.
    let reported = false;
    for (const rank of list) {
      const path = rankLogPath(dir, rank);
      const stream = createWriteStream(path);
      // The job goes on, a failed file's rank with its output on the terminal only.
      stream.once('error', (error) => {
        if (reported) return;
        reported = true;
        onError(`cannot write ${path}: ${error.message}; the rank logs in ${dir} may stop here, the job goes on`);
      });
      this.streams.set(rank, stream);
    }
  }

  lineSink(rank: number): (line: string) => void {
    const stream = this.streams.get(rank);
    return (line) => {
      if (stream !== undefined && !stream.destroyed) stream.write(`${line}\n`);
    };
  }

  /** Flushes and closes every file. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.streams.values()].map(
        (stream) => new Promise<void>((resolve) => (stream.destroyed ? resolve() : stream.end(resolve))),
      ),
    );
  }
}
