/** The log levels, most severe first: a logger at level L writes the events of L and above. */

export const kLogLevels = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof kLogLevels)[number];

/** A level's place in kLogLevels: an event is written when its rank is at most the threshold's. */
export function levelRank(level: LogLevel): number {
  return kLogLevels.indexOf(level);
}

export function isLogLevel(value: unknown): value is LogLevel {
  return kLogLevels.includes(value as LogLevel);
}
