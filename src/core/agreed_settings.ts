/**
 * The settings every rank of a job must share (the rows of settings.ts marked `agree`) as one
 * canonical text, which the ranks compare at start-up (engine/settings_agreement.ts). The
 * caller's thread writes it (it has the table); the engine's thread only compares texts
 * (settings_disagreement.ts), so that it need not load the table and its schemas.
 *
 * The text is one line `VARIABLE (init option name)=value` per agreed setting, in the table's
 * order, of the resolved values (an option or the variable, whichever set it): two ranks that
 * resolve the same values write the same text, in Node and in a browser alike. Objects are written
 * with their keys sorted; an algorithm left to the engine (`auto`) is written as if left out,
 * since it is the same.
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

/** The agreed settings of `values` as `VARIABLE (init option name)=value` lines. */
export function agreedSettingsText(values: Readonly<Record<SettingName, unknown>>): string {
  return kAgreedSettings.map(({ name, env }) => `${env} (init option ${name})=${canonical(values[name])}`).join('\n');
}

/** What a rank's configuration must share beyond the table: the process sets defined at init(), ids and all. */
interface SharedConfig {
  readonly processSets: readonly (readonly number[])[];
}

/**
 * The text the ranks compare: the agreed settings, then the process sets defined at init()
 * (their ids follow their order, so ranks that list them differently would run one set's
 * collectives on another's members).
 */
export function agreedConfigText(config: Readonly<Record<SettingName, unknown>> & SharedConfig): string {
  const sets = config.processSets.length === 0 ? 'none' : config.processSets.map((ranks) => `[${ranks.join(',')}]`).join(' ');
  return `${agreedSettingsText(config)}\ninit option processSets=${sets}`;
}
