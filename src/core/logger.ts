/** A leveled logger that writes one line per event to stderr, prefixed with the rank. */

import { type LogLevel, levelRank } from './log_levels.js';

export type { LogLevel } from './log_levels.js';

export class Logger {
  private readonly threshold: number;

  constructor(
    private readonly prefix: string,
    level: LogLevel,
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {
    this.threshold = levelRank(level);
  }

  error(message: string): void {
    this.log('error', message);
  }
  warn(message: string): void {
    this.log('warn', message);
  }
  info(message: string): void {
    this.log('info', message);
  }
  debug(message: string): void {
    this.log('debug', message);
  }
  enabled(level: LogLevel): boolean {
    return levelRank(level) <= this.threshold;
  }

  private log(level: LogLevel, message: string): void {
    if (levelRank(level) > this.threshold) return;
    this.write(`ringreduce ${this.prefix} ${level.toUpperCase()}: ${message}\n`);
  }
}
