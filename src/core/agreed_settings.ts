/**
 * The settings every rank of a job must share (the rows of settings.ts marked `agree`), as one
 * canonical text and a 32-bit digest of it, and the message that names the ones that differ.
 *
 * The text is one line `VARIABLE=value` per agreed setting, in the table's order, of the
 * resolved values (an option or the variable, whichever set it): two ranks that resolve the same
 * values write the same text, in Node and in a browser alike. Objects are written with their keys
 * sorted; an algorithm left to the engine (`auto`) is written as if left out, since it is the same.
 */
import { kSettings, type SettingName } from './settings.js';

/** The agreed settings: name and variable, in the table's order. */
export const kAgreedSettings: readonly { readonly name: SettingName; readonly env: string }[] = Object.freeze(
  (Object.entries(kSettings) as [SettingName, (typeof kSettings)[SettingName]][])
    .filter(([, row]) => row.agree === true)
    .map(([name, row]) => Object.freeze({ name, env: row.env })),
);

/** One value as the canonical text writes it. */
function canonical(value: unknown): string {
  if (value === undefined) return 'unset';
  if (typeof value !== 'object' || value === null) return String(value);
  const pairs = Object.entries(value)
    .filter(([, v]) => v !== undefined && v !== 'auto')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${String(v)}`);
  return pairs.length === 0 ? 'unset' : pairs.join(',');
}

/** The agreed settings of `values` as `VARIABLE=value` lines. */
export function agreedSettingsText(values: Readonly<Record<SettingName, unknown>>): string {
  return kAgreedSettings.map(({ name, env }) => `${env}=${canonical(values[name])}`).join('\n');
}

/** FNV-1a over the text's UTF-8 bytes, as a signed 32-bit integer (it travels in an Int32Array). */
export function digestOf(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

/** At most this many ranks are listed per value, so that a large job's error stays readable. */
const kRanksListed = 8;

function ranksText(ranks: readonly number[]): string {
  const listed = ranks.slice(0, kRanksListed).join(', ');
  const more = ranks.length > kRanksListed ? ` and ${ranks.length - kRanksListed} more` : '';
  return ranks.length === 1 ? `rank ${listed}` : `ranks ${listed}${more}`;
}

/**
 * Every agreed setting whose value differs between the ranks' texts (`texts[r]` is rank r's),
 * one sentence each, such as "RINGREDUCE_SEGMENT_BYTES (init option segmentBytes) differs between
 * ranks: rank 0 has 4194304, rank 1 has 1048576"; empty when they agree.
 */
export function describeDisagreement(texts: readonly string[]): string[] {
  const parsed = texts.map((text) => {
    const values = new Map<string, string>();
    for (const line of text.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) values.set(line.slice(0, at), line.slice(at + 1));
    }
    return values;
  });
  const variables = [...new Set(parsed.flatMap((values) => [...values.keys()]))];
  const sentences: string[] = [];
  for (const env of variables) {
    const byValue = new Map<string, number[]>();
    parsed.forEach((values, rank) => {
      // A rank of another version may not know a setting: that differs too.
      const value = values.get(env) ?? 'not known';
      byValue.set(value, [...(byValue.get(value) ?? []), rank]);
    });
    if (byValue.size < 2) continue;
    const name = kAgreedSettings.find((s) => s.env === env)?.name;
    const who = [...byValue].map(([value, ranks]) => `${ranksText(ranks)} ${ranks.length === 1 ? 'has' : 'have'} ${value}`);
    sentences.push(`${env}${name ? ` (init option ${name})` : ''} differs between ranks: ${who.join(', ')}`);
  }
  return sentences;
}
