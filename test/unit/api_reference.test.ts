/**
 * The API reference (`npm run docs:api`: TypeDoc over the built .d.ts of both entry points,
 * typedoc.json) builds without broken links ({@link} targets, relative paths), and every export
 * users see is documented, down to methods, accessors and constructors (typedoc.json's
 * requiredToBeDocumented): an undocumented one fails here, named as TypeDoc names it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));

describe('the API reference', () => {
  it('builds with no broken link, and no undocumented export', () => {
    const typedoc = spawnSync(process.execPath, [join(kRoot, 'node_modules/typedoc/bin/typedoc'), '--emit', 'none'], {
      cwd: kRoot,
      encoding: 'utf8',
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    });
    const lines = `${typedoc.stdout}${typedoc.stderr}`
      .replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '') // TypeDoc's colours
      .trim()
      .split('\n');
    const undocumented: string[] = [];
    const other: string[] = [];
    for (const line of lines) {
      const match = /^\[warning\] (\S+) \(\w+\), defined in .* does not have any documentation$/.exec(line);
      if (match) undocumented.push(match[1] as string);
      else if (!/^\[warning\] Found 0 errors and \d+ warnings$/.test(line) && line !== '') other.push(line);
    }
    assert.deepEqual(other, [], 'TypeDoc errors or warnings other than undocumented exports');
    assert.deepEqual(undocumented, [], 'exports without documentation (document them)');
  });
});
