/** core/version.ts says the version package.json says (npm version rewrites both: scripts/sync-version.mjs). */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { kVersion } from '../../src/core/version.js';

test('kVersion is the version of package.json', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.equal(kVersion, pkg.version);
});
