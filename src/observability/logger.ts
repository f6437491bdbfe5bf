/** A leveled logger that writes one line per event to stderr, prefixed with the rank. */

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const kLevels: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

export class Logger {
  private readonly threshold: number;

  constructor(
    private readonly prefix: string,
    level: LogLevel,
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {
    this.threshold = kLevels[level];
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
    return kLevels[level] <= this.threshold;
  }

  private log(level: LogLevel, message: string): void {
    if (kLevels[level] > this.threshold) return;
    this.write(`ringreduce ${this.prefix} ${level.toUpperCase()}: ${message}\n`);
  }
}
