/**
 * Reading one environment variable as a typed value: each refuses a malformed value with an
 * InvalidArgumentError that names the variable and quotes the value. An empty value is unset.
 */
import { InvalidArgumentError } from './errors.js';

export type Env = Readonly<Record<string, string | undefined>>;

/** An integer of at least `min`, or undefined when unset. */
export function envInt(env: Env, name: string, min = 0): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(`environment variable ${name}=${JSON.stringify(raw)} must be an integer >= ${min}`);
  }
  return value;
}

/** `1` or `0`; anything else is refused by name. */
export function envFlag(env: Env, name: string): boolean | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (raw !== '1' && raw !== '0') throw new InvalidArgumentError(`${name} must be 1 or 0, got ${JSON.stringify(raw)}`);
  return raw === '1';
}

/** One of `values`; `aliases` maps other spellings to them (Horovod's 1 and 0 for on and off). */
export function envChoice<T extends string>(
  env: Env,
  name: string,
  values: readonly T[],
  aliases: Readonly<Record<string, T>> = {},
): T | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = aliases[raw] ?? raw;
  if (!(values as readonly string[]).includes(value)) {
    const also = Object.keys(aliases).length > 0 ? ` (or ${Object.keys(aliases).join(', ')})` : '';
    throw new InvalidArgumentError(`${name} must be one of ${values.join(', ')}${also}, got ${JSON.stringify(raw)}`);
  }
  return value as T;
}

/** Any non-empty text. */
export function envText(env: Env, name: string): string | undefined {
  return env[name] || undefined;
}
