/** The settings table (src/core/settings.ts) against init(), the environment and docs/env.md. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { kInitOptionNames, resolveConfig } from '../../src/core/config.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { kSettings, type SettingName } from '../../src/core/settings.js';

const kDocs = readFileSync(new URL('../../../docs/env.md', import.meta.url), 'utf8');
const kRows = Object.entries(kSettings) as [SettingName, (typeof kSettings)[SettingName]][];

/** docs/env.md's table rows by variable: the cells after the variable's name. */
function docsRows(): Map<string, { header: string[]; cells: string[] }> {
  const rows = new Map<string, { header: string[]; cells: string[] }>();
  let header: string[] = [];
  for (const line of kDocs.split('\n')) {
    if (!line.startsWith('|')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    const variable = /^`(RINGREDUCE_[A-Z_]+)`$/.exec(cells[0] ?? '')?.[1];
    if (variable === undefined) {
      if (!/^-+$/.test(cells[0] ?? '')) header = cells;
      continue;
    }
    rows.set(variable, { header, cells });
  }
  return rows;
}

/** A default as docs/env.md writes it. */
function documented(value: unknown): string {
  if (value === undefined) return 'unset';
  if (typeof value === 'boolean') return value ? '`1`' : '`0`';
  return `\`${value}\``;
}

test('docs/env.md lists every setting with its default', () => {
  const rows = docsRows();
  for (const [name, row] of kRows) {
    const documentedRow = rows.get(row.env);
    assert.ok(documentedRow, `docs/env.md has no row for ${row.env} (init option '${name}')`);
    const at = documentedRow.header.indexOf('Default');
    // The rows of the job's addresses table have per-launch values instead of a default.
    if (at < 0) continue;
    assert.equal(documentedRow.cells[at], documented(row.fallback), `${row.env}'s default in docs/env.md`);
  }
});

test('every setting is an init() option, resolved as option, then variable, then default', () => {
  for (const [name, row] of kRows) {
    assert.ok(kInitOptionNames.includes(name), `init() has no option '${name}'`);
    assert.equal(resolveConfig({}, {})[name], row.fallback, `${name}'s default`);
  }
  const env = { RINGREDUCE_SEGMENT_BYTES: '65536', RINGREDUCE_SHARED_MEMORY: '0', RINGREDUCE_TIMELINE: '/tmp/t.json' };
  const fromEnv = resolveConfig({}, env);
  assert.deepEqual([fromEnv.segmentBytes, fromEnv.sharedMemory, fromEnv.timeline], [65536, false, '/tmp/t.json']);
  const fromOptions = resolveConfig({ segmentBytes: 4096, sharedMemory: true, timeline: '/tmp/o.json' }, env);
  assert.deepEqual([fromOptions.segmentBytes, fromOptions.sharedMemory, fromOptions.timeline], [4096, true, '/tmp/o.json']);
  // An empty variable is unset.
  assert.equal(resolveConfig({}, { RINGREDUCE_SEGMENT_BYTES: '' }).segmentBytes, kSettings.segmentBytes.fallback);
});

test('a malformed variable is refused naming it and its value', () => {
  const cases: [string, string, RegExp][] = [
    ['RINGREDUCE_SEGMENT_BYTES', '0', /RINGREDUCE_SEGMENT_BYTES="0" must be an integer >= 1/],
    ['RINGREDUCE_BURST_HOLD_MS', '1.5', /RINGREDUCE_BURST_HOLD_MS="1.5" must be an integer >= 0/],
    ['RINGREDUCE_UNIX_SOCKETS', 'yes', /RINGREDUCE_UNIX_SOCKETS must be 1 or 0, got "yes"/],
    ['RINGREDUCE_BACKEND', 'gloo', /RINGREDUCE_BACKEND must be one of tcp, mpi, auto, web, got "gloo"/],
    ['RINGREDUCE_LOG_LEVEL', 'loud', /RINGREDUCE_LOG_LEVEL must be one of error, warn, info, debug, got "loud"/],
  ];
  for (const [name, value, message] of cases) {
    assert.throws(
      () => resolveConfig({}, { [name]: value }),
      (e: unknown) => e instanceof InvalidArgumentError && message.test(e.message),
      name,
    );
  }
});
