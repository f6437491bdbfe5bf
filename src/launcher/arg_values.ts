/** Validators for ringrun's flag values. Each error names the flag and repeats the bad value. */
import { InvalidArgumentError } from '../core/errors.js';
import { kLogLevels, type LogLevel } from '../core/log_levels.js';

/** setTimeout's limit: a longer delay silently becomes 1 ms in Node. */
export const kMaxDurationMs = 2 ** 31 - 1;

const kUnitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseCount(flag: string, text: string, options: { allowZero?: boolean } = {}): number {
  if (!/^\d+$/.test(text) || Number(text) < (options.allowZero ? 0 : 1)) {
    throw new InvalidArgumentError(`${flag} must be a ${options.allowZero ? 'non-negative' : 'positive'} integer, got '${text}'`);
  }
  const count = Number(text);
  if (!Number.isSafeInteger(count)) throw new InvalidArgumentError(`${flag} is too large: '${text}'`);
  return count;
}

/**
 * A duration in milliseconds, from a number with a unit: 500ms, 30s, 1.5m, 2h; or 0. A bare
 * number is refused: horovodrun's and torchrun's durations are seconds, the RINGREDUCE_*_MS
 * variables milliseconds, so `--start-timeout 30` means 30 s to some users and 30 ms to others,
 * and either reading silently gives the other half a wrong deadline.
 */
export function parseDuration(flag: string, text: string, options: { allowZero: boolean }): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) {
    throw new InvalidArgumentError(`${flag} must be a duration such as 500ms, 30s or 2m, got '${text}'`);
  }
  const value = Number(match[1]);
  if (match[2] === undefined && value !== 0) {
    throw new InvalidArgumentError(
      `${flag} ${text} has no unit: write ${match[1]}s for seconds or ${match[1]}ms for milliseconds`,
    );
  }
  const ms = Math.round(value * (kUnitMs[match[2] ?? 'ms'] as number));
  if (ms === 0 && !options.allowZero) throw new InvalidArgumentError(`${flag} must be more than 0 ms, got '${text}'`);
  if (ms > kMaxDurationMs) {
    throw new InvalidArgumentError(`${flag} must be at most ${kMaxDurationMs} ms (about 24 days), got '${text}'`);
  }
  return ms;
}

export function parseLogLevel(flag: string, text: string): LogLevel {
  const level = kLogLevels.find((candidate) => candidate === text.toLowerCase());
  if (level === undefined) {
    throw new InvalidArgumentError(`${flag} must be one of ${kLogLevels.join(', ')}, got '${text}'`);
  }
  return level;
}

export function parsePort(flag: string, text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
    throw new InvalidArgumentError(`${flag} must be a port number (1-65535), got '${text}'`);
  }
  return Number(text);
}

/** `-x NAME` (forward this launcher's value) or `-x NAME=VALUE`. */
export function parseEnvItem(text: string): { name: string; value?: string } {
  const eq = text.indexOf('=');
  const name = eq < 0 ? text : text.slice(0, eq);
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    throw new InvalidArgumentError(`-x must be NAME or NAME=VALUE with NAME a variable name, got '${text}'`);
  }
  return eq < 0 ? { name } : { name, value: text.slice(eq + 1) };
}
